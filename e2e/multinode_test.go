package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The multi-node kill test's size (the numbers: three nodes, 200
// sessions). Sessions come in waves, one created after each of the first
// kills, so that kills land while every wave runs.
const (
	multiNodes    = 3
	multiSessions = 200
	multiWaves    = 4
	multiMinKills = 6
	// multiLeaseTTL is the nodes' lease TTL (--lease-ttl): short, so that
	// a node kept down past it has its sessions taken over by the others
	// within the test, and long enough that a node busy on two loaded
	// cores still renews in time.
	multiLeaseTTL = 4 * time.Second
	// multiKillPhase bounds the phase with kills; multiSettleTimeout the
	// quiet phase after it, in which every session must finish.
	multiKillPhase     = 100 * time.Second
	multiSettleTimeout = 90 * time.Second
	// multiStreamEvery: one session in this many is followed by an SSE
	// client on a node of its own, through every kill of that node.
	multiStreamEvery = 4
	// multiPollInterval paces the operator's reads of the session list.
	multiPollInterval = 25 * time.Millisecond
)

// TestMultiNodeKills runs three nodes on one PostgreSQL schema and 200
// sessions mixing read tools, idempotent and irreversible shell commands
// (recorded outside the servers), approvals and durable waits (sleeps, and
// waits for signals sent through a random node), created and decided
// through random nodes. Every second or two a node is SIGKILLed, in turn,
// and restarted on its data directory; some stay down past the lease TTL
// so that the others take their sessions over. Then every session must have
// finished with a gap-free journal in which no step's model call was
// answered twice and no tool call ended twice, no irreversible command may
// have run twice (the outside evidence), every in-doubt effect must have
// been decided, and what SSE clients followed through the kills must be
// exactly the journals.
func TestMultiNodeKills(t *testing.T) {
	t.Parallel()
	began := time.Now()
	dsn := pgtest.FreshSchema(t)
	seed1, seed2 := rand.Uint64(), rand.Uint64()
	t.Logf("seed: %d %d (kill points, plans and node choices; the assertions hold for any seed)", seed1, seed2)
	rng := rand.New(rand.NewPCG(seed1, seed2))
	run := &multiRun{
		workload: newWorkload(t, rng),
		c:        startCluster(t, dsn, multiNodes, multiLeaseTTL),
	}
	run.createWave()
	deadline := time.Now().Add(multiKillPhase)
	for run.kills < multiMinKills || !run.allDone() && time.Now().Before(deadline) {
		run.runFor(time.Duration(700+rng.IntN(1300))*time.Millisecond, -1)
		run.killOne()
		if run.waves < multiWaves {
			run.createWave()
		}
	}
	killPhase := time.Since(began)
	waitFor(t, multiSettleTimeout, "every session to finish after the last kill", func() (bool, error) {
		run.poll(run.api(-1))
		return run.allDone(), nil
	})
	settled := time.Since(began)

	st := run.verify(run.c.pick(rng).api)
	streamed := run.verifyStreams()
	var workers []string
	for n := range multiNodes + 1 {
		if st.workers[n] > 0 {
			workers = append(workers, fmt.Sprintf("%d by %d", st.workers[n], n))
		}
	}
	t.Logf("multi-node: %d nodes, %d kills (%d kept down past the %s lease TTL), %d sessions in %d waves, %d events; "+
		"sessions run by 1, 2, 3 workers: %s; %d approvals, %d signals; in-doubt decisions: %d happened, %d did_not_happen; "+
		"re-runs: %d irreversible (after did_not_happen), %d idempotent, %d read; %d SSE clients followed %d events; "+
		"kills ended after %s, every session finished after %s, %s in all",
		multiNodes, run.kills, run.longDowns, run.c.leaseTTL, len(run.sessions), run.waves, st.events,
		strings.Join(workers, ", "), run.approvals, run.signals, run.happened, run.didNotHappen,
		st.irreversibleReruns, st.idempotentReruns, st.readReruns, len(run.streams), streamed,
		killPhase.Round(time.Millisecond), settled.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// multiRun is the state of one multi-node kill test.
type multiRun struct {
	*workload
	c         *cluster
	waves     int
	kills     int
	longDowns int
	streams   []*sessionFollower
}

// api returns a function that picks a running node other than except (-1:
// any) for each request of the operator.
func (r *multiRun) api(except int) func() *client.Client {
	return func() *client.Client { return r.c.pick(r.rng, except).api }
}

// createWave creates a wave of sessions through random nodes: every other
// one irreversible, one in four asking for approvals, a third sleeping and
// a third waiting for a signal; one in multiStreamEvery is followed by an
// SSE client.
func (r *multiRun) createWave() {
	r.t.Helper()
	r.waves++
	plans := make([]*plannedSession, multiSessions/multiWaves)
	for i := range plans {
		plans[i] = r.planMixedSession(fmt.Sprintf("w%ds%02d", r.waves, i+1), i%2 == 0, waitKind(i%3))
		plans[i].approval = i%4 == 1
	}
	r.createAll(r.api(-1), plans)
	for i, cs := range plans {
		if i%multiStreamEvery == 0 {
			node := (len(r.streams) + r.waves) % len(r.c.nodes)
			r.streams = append(r.streams, followSession(r.t, r.c.nodes[node], cs.id))
		}
	}
}

// runFor plays the operator for d through nodes other than except.
func (r *multiRun) runFor(d time.Duration, except int) {
	r.t.Helper()
	until := time.Now().Add(d)
	for time.Now().Before(until) {
		r.poll(r.api(except))
		time.Sleep(multiPollInterval)
	}
}

// killOne SIGKILLs the next node in turn, keeps it down for a moment (one
// time in three past the lease TTL, so that the others take its sessions
// over) while the operator works through the others, and restarts it on
// its data directory.
func (r *multiRun) killOne() {
	r.t.Helper()
	i := r.kills % len(r.c.nodes)
	r.kills++
	r.c.nodes[i].kill()
	down := time.Duration(100+r.rng.IntN(500)) * time.Millisecond
	if r.rng.IntN(3) == 0 {
		down = r.c.leaseTTL + time.Second
		r.longDowns++
	}
	r.runFor(down, i)
	r.c.nodes[i].restart()
}

// verifyStreams waits for every SSE client to reach the end of its
// session, requires that it collected exactly the journal, and returns the
// number of events collected.
func (r *multiRun) verifyStreams() int {
	r.t.Helper()
	api := r.c.pick(r.rng).api
	total := 0
	for _, f := range r.streams {
		want := journal(r.ctx, r.t, api, f.sessionID)
		got := f.wait(r.t, 30*time.Second)
		requireSameEvents(r.t, want, got, "SSE client of "+f.sessionID)
		total += len(got)
	}
	return total
}

// sessionFollower follows one session's event stream with the Go client
// (which resumes by itself with Last-Event-ID through the restarts of its
// node) until the session is idle, checking the sequence as it goes.
type sessionFollower struct {
	sessionID string
	done      chan struct{}
	mu        sync.Mutex
	events    []lt.Event
	err       error
}

func followSession(t *testing.T, s *server, sessionID string) *sessionFollower {
	t.Helper()
	api, err := client.New(s.url, &client.Config{MaxRetries: 1000, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	require.NoError(t, err)
	f := &sessionFollower{sessionID: sessionID, done: make(chan struct{})}
	ctx := t.Context()
	go func() {
		defer close(f.done)
		for ev, err := range api.StreamEvents(ctx, sessionID, 0) {
			f.mu.Lock()
			if err == nil && ev.Seq != int64(len(f.events))+1 {
				err = fmt.Errorf("seq %d after %d events: a gap or a duplicate", ev.Seq, len(f.events))
			}
			if err != nil {
				f.err = err
				f.mu.Unlock()
				return
			}
			f.events = append(f.events, ev)
			f.mu.Unlock()
			if statusTo(ev) == lt.SessionIdle {
				return
			}
		}
	}()
	return f
}

// wait returns the events collected once the follower reached the end.
func (f *sessionFollower) wait(t *testing.T, timeout time.Duration) []lt.Event {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(timeout):
		t.Fatalf("the SSE client of %s did not reach the end of the session within %s", f.sessionID, timeout)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NoError(t, f.err, "SSE client of %s", f.sessionID)
	return slices.Clone(f.events)
}

// zombieSessions is how many sessions the zombie holds when it is paused:
// two in an irreversible shell command, two in an idempotent one, two in a
// model call.
const zombieSessions = 6

// zombieLeaseTTL is the lease TTL of the zombie test: the zombie must stay
// paused past it, so short keeps the test short.
const zombieLeaseTTL = 2 * time.Second

// TestMultiNodeZombie pauses a node with SIGSTOP while its sessions are in
// the middle of slow steps (shell commands, which go on running, and model
// calls), waits past its lease TTL while two other nodes take the sessions
// over and finish them, then resumes it with SIGCONT. The zombie must learn
// that it lost each lease (it logs so), none of its writes may be accepted
// (the journals do not change, and no event after the takeover carries its
// worker id), and nothing may have run twice.
func TestMultiNodeZombie(t *testing.T) {
	t.Parallel()
	began := time.Now()
	dsn := pgtest.FreshSchema(t)
	seed1, seed2 := rand.Uint64(), rand.Uint64()
	t.Logf("seed: %d %d (plans; the assertions hold for any seed)", seed1, seed2)
	rng := rand.New(rand.NewPCG(seed1, seed2))
	w := newWorkload(t, rng)
	// The zombie runs alone at first, so that it claims every session.
	c := startCluster(t, dsn, 1, zombieLeaseTTL)
	zombie, zombieID := c.nodes[0], c.ids[0]
	for i := range zombieSessions {
		cs := &plannedSession{label: fmt.Sprintf("z%d", i+1), irreversible: i < 2, final: fmt.Sprintf("z%d finished", i+1)}
		slow := planStep{calls: []planCall{w.shell(cs, 2, 2500, 3000)}}
		if i >= 4 {
			slow = planStep{delayMS: 2500, calls: []planCall{{tool: "read_file", args: map[string]any{"path": "notes.md"}}}}
		}
		cs.steps = []planStep{
			{calls: []planCall{w.notes(cs.label)}},
			slow,
			{calls: []planCall{{tool: "list_files", args: map[string]any{"path": "."}}}},
		}
		w.create(zombie.api, cs)
	}

	// Pause the zombie once every session is inside its slow step: the
	// effect or the model request is journaled (durably, by the zombie),
	// and nothing else is in flight for the session.
	waitFor(t, 30*time.Second, "every session to be inside its slow step on the zombie", func() (bool, error) {
		for _, cs := range w.sessions {
			l, err := zombie.api.ListEvents(w.ctx, cs.id, 0, client.MaxListLimit)
			if err != nil {
				return false, err
			}
			last := l.Data[len(l.Data)-1]
			want := lt.EventToolStarted // the shell command runs
			if cs.steps[1].delayMS > 0 {
				want = lt.EventModelRequested // the model thinks
			}
			if last.Step != 2 || last.WorkerID != zombieID || last.Type != want {
				return false, nil
			}
		}
		return true, nil
	})
	zombie.pause()
	paused := time.Now()

	// Two other nodes take over once the zombie's leases expire, and the
	// operator decides the in-doubt commands through them.
	c.add()
	c.add()
	others := func() *client.Client { return c.pick(rng, 0).api }
	waitFor(t, c.leaseTTL+60*time.Second, "the other nodes to finish the zombie's sessions", func() (bool, error) {
		w.poll(others)
		return w.allDone(), nil
	})
	took := time.Since(paused)

	// The takeover point of each session: its first event written by
	// another worker. The journals as they stand, before the zombie wakes.
	takeover := map[string]int64{}
	before := map[string][]lt.Event{}
	for _, cs := range w.sessions {
		evs := journal(w.ctx, t, others(), cs.id)
		before[cs.id] = evs
		for _, ev := range evs {
			if ev.WorkerID != "" && ev.WorkerID != zombieID {
				takeover[cs.id] = ev.Seq
				break
			}
		}
		require.NotZero(t, takeover[cs.id], "session %s was finished by no other node:\n%s", cs.label, describeJournal(evs))
	}

	// The zombie wakes: each of its runners must find its lease lost.
	logFrom := zombie.logSize()
	zombie.resume()
	waitFor(t, 30*time.Second, "the zombie to log the loss of every lease", func() (bool, error) {
		log := zombie.logSince(logFrom)
		for _, cs := range w.sessions {
			if !logsLeaseLost(log, cs.id) {
				return false, nil
			}
		}
		return true, nil
	})
	ready, err := probeReady(zombie)
	require.NoError(t, err)
	require.Equal(t, 200, ready.status, "the zombie is ready again after its pause: %s", ready.message)

	// None of its writes was accepted: the journals are as they were, and
	// no event after a takeover carries the zombie's worker id.
	for _, cs := range w.sessions {
		evs := journal(w.ctx, t, zombie.api, cs.id)
		requireSameEvents(t, before[cs.id], evs, "journal of "+cs.label+" after the zombie woke")
		for _, ev := range evs {
			if ev.Seq > takeover[cs.id] {
				require.NotEqual(t, zombieID, ev.WorkerID, "session %s: seq %d (%s) was written by the zombie after the takeover at seq %d",
					cs.label, ev.Seq, ev.Type, takeover[cs.id])
			}
		}
	}
	st := w.verify(others())
	t.Logf("zombie: paused in its sessions' slow steps; the other nodes took over and finished them %s later (lease TTL %s); "+
		"sessions written by 2, 3 workers: %d, %d; in-doubt decisions: %d happened, %d did_not_happen; re-runs: %d idempotent, %d read; %s in all",
		took.Round(time.Millisecond), c.leaseTTL, st.workers[2], st.workers[3], w.happened, w.didNotHappen, st.idempotentReruns, st.readReruns,
		time.Since(began).Round(time.Millisecond))
}

// logsLeaseLost reports whether a node's log says it lost its lease on the
// session.
func logsLeaseLost(log, sessionID string) bool {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "lease lost") && strings.Contains(line, "session="+sessionID) {
			return true
		}
	}
	return false
}

// failoverSessions is how many sessions the SSE failover test streams.
const failoverSessions = 6

// failoverMaxDelay bounds how long after it was written an event reaches a
// stream on another node. Without notifications a stream would re-read
// only at its ping interval (15 s by default), so a bound well below that
// shows LISTEN/NOTIFY carried the event.
const failoverMaxDelay = 3 * time.Second

// TestMultiNodeSSEFailover follows sessions' event streams on node A while
// other nodes run them, kills A, and resumes every stream on a node that
// does not run its session with Last-Event-ID. Each stream must have
// collected exactly the journal (no gap, no duplicate, as it went and in
// the end), and the events written by other nodes must have reached it at
// once, before and after the failover.
func TestMultiNodeSSEFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.FreshSchema(t)
	c := startCluster(t, dsn, 3, multiLeaseTTL)
	var ids []string
	for i := range failoverSessions {
		s, err := c.nodes[i%3].api.CreateSession(ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{
				Model: lt.ModelSpec{Provider: "scripted", Name: "failover", Script: failoverScript(t, i)},
				Tools: []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}, {Name: "list_files"}},
			},
			Input: fmt.Sprintf("failover session %d", i),
		})
		require.NoError(t, err)
		ids = append(ids, s.ID)
	}

	// Who runs what: the worker of each session's first model request.
	runner := map[string]string{}
	waitFor(t, 30*time.Second, "every session to be claimed", func() (bool, error) {
		for _, id := range ids {
			l, err := c.nodes[0].api.ListEvents(ctx, id, 0, client.MaxListLimit)
			if err != nil {
				return false, err
			}
			for _, ev := range l.Data {
				if ev.WorkerID != "" {
					runner[id] = ev.WorkerID
					break
				}
			}
			if runner[id] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	// A is the node that runs the fewest of them, so most streams on A
	// carry events written elsewhere.
	a, fewest := 0, len(ids)+1
	for i, nid := range c.ids {
		n := 0
		for _, r := range runner {
			if r == nid {
				n++
			}
		}
		if n < fewest {
			a, fewest = i, n
		}
	}
	t.Logf("stream node A: %s, running %d of %d sessions", c.nameOf(c.ids[a]), fewest, len(ids))

	streams := make([]*liveStream, len(ids))
	for i, id := range ids {
		streams[i] = followLive(t, c.nodes[a], c.ids[a], id, nil)
	}
	waitFor(t, 30*time.Second, "the streams on A to carry events written by other nodes", func() (bool, error) {
		n := 0
		for _, s := range streams {
			if s.received() == 0 {
				return false, nil
			}
			n += s.foreignLive()
		}
		return n >= 3, nil
	})
	c.nodes[a].kill()
	for i, s := range streams {
		require.NoError(t, s.waitEnded(30*time.Second), "the stream of %s on A after A died", ids[i])
		require.Positive(t, len(s.events), "the stream of %s on A", ids[i])
	}
	preKill := 0
	for _, s := range streams {
		preKill += s.foreignLive()
	}

	// Resume each stream on a node that does not run its session (A's
	// sessions on either survivor), then bring A back: it resumes its own.
	resumed := make([]*liveStream, len(ids))
	for i, id := range ids {
		b := -1
		for j := range c.nodes {
			if j != a && c.ids[j] != runner[id] && (b < 0 || i%2 == 1) {
				b = j
			}
		}
		resumed[i] = followLive(t, c.nodes[b], c.ids[b], id, streams[i])
	}
	c.nodes[a].restart()
	postKill := 0
	var slowest time.Duration
	for i, id := range ids {
		require.NoError(t, resumed[i].waitEnded(60*time.Second), "the resumed stream of %s", id)
		require.True(t, resumed[i].idle, "the resumed stream of %s ended before the session did: %v", id, resumed[i].err)
		want := journal(ctx, t, c.nodes[a].api, id)
		requireGapFree(t, id, want)
		requireSameEvents(t, want, resumed[i].events, "stream of "+id+" across the failover")
		postKill += resumed[i].foreignLive() - streams[i].foreignLive()
		slowest = max(slowest, resumed[i].slowestForeign)
	}
	require.Positive(t, preKill, "no event written by another node reached the streams on A")
	require.Positive(t, postKill, "no event written by another node reached the resumed streams")
	require.Less(t, slowest, failoverMaxDelay, "an event written by another node reached a stream late: notifications did not carry it")
	t.Logf("SSE failover: %d streams, %d events written elsewhere seen live before the kill and %d after; the slowest reached its stream %s after it was written",
		len(ids), preKill, postKill, slowest.Round(time.Millisecond))
}

// failoverScript is 20 steps of reads and writes, each thinking 150 ms,
// then a final text: about four seconds, so the kill lands mid-session.
func failoverScript(t *testing.T, i int) json.RawMessage {
	var steps []map[string]any
	for s := range 20 {
		call := map[string]any{"name": "read_file", "arguments": map[string]any{"path": "notes.md"}}
		switch {
		case s == 0:
			call = map[string]any{"name": "write_file", "arguments": map[string]any{"path": "notes.md", "content": fmt.Sprintf("session %d\n", i)}}
		case s%3 == 1:
			call = map[string]any{"name": "list_files", "arguments": map[string]any{}}
		}
		steps = append(steps, map[string]any{"delay_ms": 150, "tool_calls": []any{call}})
	}
	steps = append(steps, map[string]any{"text": fmt.Sprintf("failover session %d done", i)})
	raw, err := json.Marshal(steps)
	require.NoError(t, err)
	return raw
}

// liveStream is a raw stream connection of one session read in the
// background, which records when each event arrived.
type liveStream struct {
	nodeID    string
	sessionID string
	connected time.Time
	ended     chan struct{}

	// Set by the reader; read after ended is closed.
	events []lt.Event
	err    error
	idle   bool
	// foreign counts the events written by another node after the stream
	// connected; slowestForeign is the longest any took to arrive.
	foreign        int
	slowestForeign time.Duration
	mu             sync.Mutex
}

// followLive opens a stream on s from where prev stopped (from the start
// when prev is nil) with Last-Event-ID, and reads it in the background
// until the session is idle or the connection ends.
func followLive(t *testing.T, s *server, nodeID, sessionID string, prev *liveStream) *liveStream {
	t.Helper()
	ls := &liveStream{nodeID: nodeID, sessionID: sessionID, ended: make(chan struct{})}
	last := int64(-1)
	if prev != nil {
		ls.events = slices.Clone(prev.events)
		ls.foreign = prev.foreign
		ls.slowestForeign = prev.slowestForeign
		last = ls.events[len(ls.events)-1].Seq
	}
	ls.connected = time.Now()
	raw := openStream(t, s, sessionID, last)
	go func() {
		defer close(ls.ended)
		defer raw.close()
		for {
			f, err := raw.next()
			arrived := time.Now()
			var ev lt.Event
			if err == nil {
				ev, err = decodeFrame(f)
			}
			ls.mu.Lock()
			if err == nil && ev.Seq != int64(len(ls.events))+1 {
				err = fmt.Errorf("%w: seq %d after %d events: a gap or a duplicate", errBadStream, ev.Seq, len(ls.events))
			}
			if err != nil {
				ls.err = err
				ls.mu.Unlock()
				return
			}
			ls.events = append(ls.events, ev)
			if ev.WorkerID != "" && ev.WorkerID != nodeID && ev.Time.After(ls.connected) {
				ls.foreign++
				ls.slowestForeign = max(ls.slowestForeign, arrived.Sub(ev.Time))
			}
			if statusTo(ev) == lt.SessionIdle {
				ls.idle = true
				ls.mu.Unlock()
				return
			}
			ls.mu.Unlock()
		}
	}()
	return ls
}

// received is the number of events the stream delivered so far.
func (ls *liveStream) received() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.events)
}

// foreignLive is the number of events written by other nodes that arrived
// live so far.
func (ls *liveStream) foreignLive() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.foreign
}

// errBadStream marks what a stream delivered wrong: a frame that does not
// decode, or an event that does not continue the sequence.
var errBadStream = errors.New("bad event stream")

// waitEnded waits for the reader to stop. A stream that reached the end of
// the session is fine; one cut by its node's death is fine too, as long as
// everything it delivered continued the sequence (a frame it had begun is
// simply not delivered). A bad stream, or one that hung until its timeout,
// is an error.
func (ls *liveStream) waitEnded(timeout time.Duration) error {
	select {
	case <-ls.ended:
	case <-time.After(timeout):
		return fmt.Errorf("stream of %s still open after %s", ls.sessionID, timeout)
	}
	if ls.err != nil && (errors.Is(ls.err, errBadStream) || errors.Is(ls.err, context.DeadlineExceeded)) {
		return fmt.Errorf("stream of %s: %w", ls.sessionID, ls.err)
	}
	return nil
}

// decodeFrame is frame.event without a *testing.T, for readers in their
// own goroutine.
func decodeFrame(f frame) (lt.Event, error) {
	var ev lt.Event
	if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
		return ev, fmt.Errorf("%w: frame data %q: %v", errBadStream, f.data, err)
	}
	if !f.hasID || f.id != strconv.FormatInt(ev.Seq, 10) || f.typ != ev.Type {
		return ev, fmt.Errorf("%w: frame id %q and event %q do not match seq %d, type %s", errBadStream, f.id, f.typ, ev.Seq, ev.Type)
	}
	return ev, nil
}

// postgresOutage is how long PostgreSQL stays down once every node reports
// not ready: a random time in this range.
const (
	postgresOutageMin = 500 * time.Millisecond
	postgresOutageMax = 2 * time.Second
)

// TestMultiNodePostgresRestart runs two nodes on a PostgreSQL cluster of
// its own and stops the cluster (pg_ctl stop -m fast) while sessions run:
// every node's /readyz must report not ready, naming the storage error, for
// as long as it is down. Once it is started again the nodes must be ready
// again and every session must finish as the workload requires (nothing
// lost, nothing run twice, every in-doubt effect decided).
func TestMultiNodePostgresRestart(t *testing.T) {
	t.Parallel()
	began := time.Now()
	pg := startPostgres(t)
	seed1, seed2 := rand.Uint64(), rand.Uint64()
	t.Logf("seed: %d %d (plans, outage start and length; the assertions hold for any seed)", seed1, seed2)
	rng := rand.New(rand.NewPCG(seed1, seed2))
	w := newWorkload(t, rng)
	c := startCluster(t, pg.dsn, 2, multiLeaseTTL)
	anyNode := func() *client.Client { return c.pick(rng).api }
	plans := make([]*plannedSession, 30)
	for i := range plans {
		plans[i] = w.planMixedSession(fmt.Sprintf("pg%02d", i+1), i%2 == 0, waitKind(i%3))
		plans[i].approval = i%4 == 1
	}
	w.createAll(anyNode, plans)
	// Run until the sessions are well under way: 30-60% of the fewest
	// events they can write (four per model call: its request and answer,
	// and a tool call's request and end, or the turn's end and status).
	least := 0
	for _, cs := range w.sessions {
		least += 4 * (len(cs.steps) + 1)
	}
	progress := int64(least*3/10 + rng.IntN(least*3/10))
	waitFor(t, 60*time.Second, "the sessions to make progress", func() (bool, error) {
		return w.poll(anyNode) >= progress, nil
	})

	logFrom := make([]int64, len(c.nodes))
	for i, n := range c.nodes {
		logFrom[i] = n.logSize()
	}
	pg.stop()
	stopped := time.Now()
	var detail string
	waitFor(t, 30*time.Second, "every node to report not ready", func() (bool, error) {
		for _, n := range c.nodes {
			r, err := probeReady(n)
			if err != nil || r.status == 200 {
				return false, err
			}
			require.Equal(t, 503, r.status, "/readyz of %s while PostgreSQL is down", n.addr)
			require.True(t, strings.HasPrefix(r.message, "not ready: storage: ") && len(r.message) > len("not ready: storage: "),
				"/readyz of %s names what is wrong: %q", n.addr, r.message)
			detail = r.message
		}
		return true, nil
	})
	outage := postgresOutageMin + time.Duration(rng.Int64N(int64(postgresOutageMax-postgresOutageMin)))
	for until := time.Now().Add(outage); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
		for _, n := range c.nodes {
			r, err := probeReady(n)
			require.NoError(t, err)
			require.Equal(t, 503, r.status, "/readyz of %s while PostgreSQL is down", n.addr)
		}
	}
	pg.start()
	down := time.Since(stopped)
	waitFor(t, 60*time.Second, "every node to be ready again", func() (bool, error) {
		for _, n := range c.nodes {
			r, err := probeReady(n)
			if err != nil || r.status != 200 {
				return false, err
			}
		}
		return true, nil
	})
	// Each node's listener lost its connection and made a new one, so
	// notifications flow between the nodes again.
	waitFor(t, 60*time.Second, "every node's PostgreSQL listener to reconnect", func() (bool, error) {
		for i, n := range c.nodes {
			log := n.logSince(logFrom[i])
			if !strings.Contains(log, "postgres listener lost its connection") || !strings.Contains(log, "postgres listener reconnected") {
				return false, nil
			}
		}
		return true, nil
	})
	waitFor(t, c.leaseTTL+90*time.Second, "every session to finish after the outage", func() (bool, error) {
		w.poll(anyNode)
		return w.allDone(), nil
	})
	st := w.verify(anyNode())
	slowest := requireLiveAcrossNodes(t, c)
	t.Logf("PostgreSQL restart: down %s (readyz said %q); %d sessions, %d events; %d approvals, %d signals; "+
		"in-doubt decisions: %d happened, %d did_not_happen; re-runs: %d irreversible, %d idempotent, %d read; "+
		"after the outage, events reached a stream on another node within %s; %s in all",
		down.Round(time.Millisecond), detail, len(w.sessions), st.events, w.approvals, w.signals, w.happened, w.didNotHappen,
		st.irreversibleReruns, st.idempotentReruns, st.readReruns, slowest.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// requireLiveAcrossNodes creates a session of failoverScript, follows its
// stream on a node that does not run it, and requires the stream to be the
// journal, with the events written by the other node arriving at once. It
// returns the longest any took.
func requireLiveAcrossNodes(t *testing.T, c *cluster) time.Duration {
	t.Helper()
	ctx := t.Context()
	s, err := c.nodes[0].api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Name: "live", Script: failoverScript(t, 0)},
			Tools: []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}, {Name: "list_files"}},
		},
		Input: "live across nodes",
	})
	require.NoError(t, err)
	var runner string
	waitFor(t, 30*time.Second, "the session to be claimed", func() (bool, error) {
		l, err := c.nodes[0].api.ListEvents(ctx, s.ID, 0, client.MaxListLimit)
		if err != nil {
			return false, err
		}
		for _, ev := range l.Data {
			if ev.WorkerID != "" {
				runner = ev.WorkerID
				return true, nil
			}
		}
		return false, nil
	})
	o := slices.IndexFunc(c.ids, func(id string) bool { return id != runner })
	stream := followLive(t, c.nodes[o], c.ids[o], s.ID, nil)
	require.NoError(t, stream.waitEnded(60*time.Second))
	require.True(t, stream.idle, "the stream of %s on %s ended before the session: %v", s.ID, c.nameOf(c.ids[o]), stream.err)
	requireSameEvents(t, journal(ctx, t, c.nodes[o].api, s.ID), stream.events, "stream of "+s.ID)
	require.Positive(t, stream.foreign, "no event written by %s reached the stream on %s live", c.nameOf(runner), c.nameOf(c.ids[o]))
	require.Less(t, stream.slowestForeign, failoverMaxDelay, "an event written by another node reached the stream late: notifications did not carry it")
	return stream.slowestForeign
}

// TestMultiNodeWorkspaceFollowsSession moves one session between two nodes
// at its waits, so that it comes back to a node that ran it before: node A
// writes notes.md and the session waits for a signal; with A down, node B
// takes the signal, rewrites notes.md and the session waits again; with B
// down and A back, A takes the second signal and reads notes.md. The read
// must return what B wrote: a node's copy of a workspace is only a cache of
// the session's, and a stale one must not be used.
func TestMultiNodeWorkspaceFollowsSession(t *testing.T) {
	t.Parallel()
	dsn := pgtest.FreshSchema(t)
	w := newWorkload(t, rand.New(rand.NewPCG(1, 2)))
	c := newCluster(t, dsn, multiLeaseTTL)
	a := c.nodes[c.add()]
	cs := &plannedSession{label: "roam", irreversible: true, final: "roam finished", signal: "go.roam"}
	wait := planCall{tool: "wait_for_signal", args: map[string]any{"name": cs.signal, "timeout_seconds": 3600}}
	cs.steps = []planStep{
		{calls: []planCall{w.notes(cs.label)}},
		{calls: []planCall{wait}},
		{calls: []planCall{w.write(cs.label, 3)}},
		{calls: []planCall{wait}},
		{calls: []planCall{{tool: "read_file", args: map[string]any{"path": "notes.md"}}}},
	}
	w.create(a.api, cs)
	waits := func(s *server, n int) {
		t.Helper()
		waitFor(t, 60*time.Second, fmt.Sprintf("wait %d of the session", n), func() (bool, error) {
			evs, err := s.api.ListEvents(w.ctx, cs.id, 0, client.MaxListLimit)
			if err != nil {
				return false, err
			}
			started := 0
			for _, ev := range evs.Data {
				if ev.Type == lt.EventWaitStarted {
					started++
				}
			}
			sess, err := s.api.GetSession(w.ctx, cs.id)
			return started == n && sess.Status == lt.SessionWaiting, err
		})
	}
	waits(a, 1)

	b := c.nodes[c.add()]
	a.kill()
	w.sendSignal(b.api, cs)
	waits(b, 2)

	a.restart()
	b.kill()
	cs.signalSent = false
	w.sendSignal(a.api, cs)
	waitTerminal(w.ctx, t, a, cs.id, 60*time.Second)
	st := w.verify(a.api)
	require.Equal(t, 1, st.workers[2], "the session ran on both nodes")
}
