package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// treeReader reads a tree stream and checks every frame against its own
// model of the cursor: per session, each event's seq follows the last one
// read (no gap, no repeat, across reconnections), and the frame's id is the
// cursor after that event.
type treeReader struct {
	t      *testing.T
	s      *sseStream
	cursor lt.TreeCursor
	lastID string
	frames int
}

func newTreeReader(t *testing.T, s *sseStream, start lt.TreeCursor) *treeReader {
	c := lt.TreeCursor{}
	maps.Copy(c, start)
	return &treeReader{t: t, s: s, cursor: c}
}

// check takes one event frame.
func (tr *treeReader) check(f sseFrame) {
	tr.t.Helper()
	var ev lt.Event
	require.NoError(tr.t, json.Unmarshal([]byte(f.data), &ev))
	require.Equal(tr.t, ev.Type, f.event)
	require.NotEmpty(tr.t, ev.SessionID)
	require.Equal(tr.t, tr.cursor[ev.SessionID]+1, ev.Seq, "session %s: events in seq order, each once", ev.SessionID)
	tr.cursor[ev.SessionID] = ev.Seq
	require.Equal(tr.t, tr.cursor.String(), f.id, "the frame's id is the cursor after it")
	tr.lastID = f.id
	tr.frames++
}

// read reads n events.
func (tr *treeReader) read(n int) {
	tr.t.Helper()
	for range n {
		tr.check(tr.s.nextEvent())
	}
}

// readAll reads until every session of b is read to the end of its journal.
func (tr *treeReader) readAll(b *treeBackend) {
	tr.t.Helper()
	for !tr.caughtUp(b) {
		tr.check(tr.s.nextEvent())
	}
}

// readToEOF reads events until the server ends the stream.
func (tr *treeReader) readToEOF() {
	tr.t.Helper()
	for {
		f, err := tr.s.next()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(tr.t, err)
		if f.comment == "" {
			tr.check(f)
		}
	}
}

func (tr *treeReader) caughtUp(b *treeBackend) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, s := range b.sessions {
		if tr.cursor[id] != int64(len(s.events)) {
			return false
		}
	}
	return true
}

// requireNoWatches waits until every watch the streams took is stopped.
func requireNoWatches(t *testing.T, b *treeBackend) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.activeWatches() > 0 {
		require.True(t, time.Now().Before(deadline), "%d watches still active", b.activeWatches())
		time.Sleep(time.Millisecond) // polling interval, not a wait for an event
	}
}

func TestTreeStreamResumesFromACompositeCursor(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	c1 := b.create(root)
	c2 := b.create(root)
	g1 := b.create(c1)
	b.emit(root, 3)
	b.emit(c1, 4)
	b.emit(c2, 2)
	b.emit(g1, 5)
	h := newTreeHarness(t, b, nil)

	// Read part of the tree, then leave.
	first := h.openStream(root, "?include=subagents", nil)
	tr := newTreeReader(t, first, nil)
	tr.read(9)
	first.close()
	cut := maps.Clone(tr.cursor)
	require.Equal(t, tr.lastID, cut.String())

	// While the client is away: more events everywhere, a child spawned
	// after the cursor with a child of its own, a grandchild under c2.
	b.emit(root, 2)
	b.emit(c2, 1)
	c3 := b.create(root)
	g3 := b.create(c3)
	g2 := b.create(c2)
	b.emit(c3, 3)
	b.emit(g3, 2)
	b.emit(g2, 1)
	b.emit(g1, 1)

	// Resume: exactly the events after the cursor, in each session's order.
	resumed := h.openStream(root, "?include=subagents", map[string]string{"Last-Event-ID": tr.lastID})
	tr.s = resumed
	before := tr.frames
	tr.readAll(b)
	total := 0
	for _, id := range []string{root, c1, c2, g1, c3, g3, g2} {
		total += len(b.journal(id))
		require.EqualValues(t, len(b.journal(id)), tr.cursor[id], "session %s read to its end", id)
	}
	require.Equal(t, total, tr.frames, "every event of the tree once")
	var owed int
	for _, id := range []string{root, c1, c2, g1, c3, g3, g2} {
		owed += len(b.journal(id)) - int(cut[id])
	}
	require.Equal(t, owed, tr.frames-before, "the resumed stream sent nothing the cursor had")

	// Live: a great-grandchild spawned now is followed from its start.
	gg := b.create(g1)
	b.emit(gg, 2)
	b.emit(root, 1)
	tr.readAll(b)
	require.EqualValues(t, 3, tr.cursor[gg])

	// The same cursor given as ?after= resumes the same way.
	again := h.openStream(root, "?include=subagents&after="+tr.lastID, nil)
	b.emit(c3, 1)
	tr.s = again
	tr.read(1)
	require.EqualValues(t, len(b.journal(c3)), tr.cursor[c3])

	first.close()
	resumed.close()
	again.close()
	requireNoWatches(t, b)
}

func TestTreeStreamResumesAfterServerRestart(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	c1 := b.create(root)
	b.emit(root, 2)
	b.emit(c1, 3)
	h1 := newTreeHarness(t, b, nil)

	s := h1.openStream(root, "?include=subagents", nil)
	tr := newTreeReader(t, s, nil)
	tr.readAll(b)
	// Events appended as the server goes down arrive before the end, or
	// after the resume: never twice, never lost.
	b.emit(c1, 2)
	h1.srv.Shutdown()
	tr.readToEOF()
	h1.ts.Close()

	// Down: the tree grows.
	c2 := b.create(root)
	g := b.create(c1)
	b.emit(c2, 2)
	b.emit(g, 1)
	b.emit(root, 1)

	h2 := newTreeHarness(t, b, nil)
	tr.s = h2.openStream(root, "?include=subagents&after="+tr.lastID, nil)
	tr.readAll(b)
	require.EqualValues(t, len(b.journal(g)), tr.cursor[g])

	// And it keeps following live.
	b.emit(g, 1)
	tr.read(1)
	tr.s.close()
	requireNoWatches(t, b)
}

func TestTreeStreamPlainSeqResumesTheRoot(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	c1 := b.create(root)
	b.emit(root, 3)
	b.emit(c1, 2)
	h := newTreeHarness(t, b, nil)

	// A cursor of the root's own stream: its children from their start.
	s := h.openStream(root, "?include=subagents", map[string]string{"Last-Event-ID": "3"})
	tr := newTreeReader(t, s, lt.TreeCursor{root: 3})
	tr.readAll(b)
	require.Equal(t, len(b.journal(root))-3+len(b.journal(c1)), tr.frames)

	s2 := h.openStream(root, "?include=subagents&after=0", nil)
	tr2 := newTreeReader(t, s2, nil)
	tr2.readAll(b)
	require.Equal(t, len(b.journal(root))+len(b.journal(c1)), tr2.frames)
}

func TestTreeStreamFindsAChildWhoseSpawnEventIsABlob(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	h := newTreeHarness(t, b, nil)
	s := h.openStream(root, "?include=subagents", nil)
	tr := newTreeReader(t, s, nil)
	tr.readAll(b)

	// A long input moved the event's data to a blob: no child_id inline.
	child := b.createWith(root, json.RawMessage(`{"blob":{"sha256":"`+sha64+`","size":70000},"preview":"{\"step\":1"}`))
	b.emit(child, 2)
	tr.readAll(b)
	require.EqualValues(t, 3, tr.cursor[child])
}

const sha64 = "ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"

func TestTreeStreamPingsRereadsAndShutsDown(t *testing.T) {
	t.Parallel()
	ticks := make(chan time.Time)
	stopped := make(chan struct{}, 8)
	b := newTreeBackend()
	root := b.create("")
	c1 := b.create(root)
	h := newTreeHarness(t, b, func(time.Duration) (<-chan time.Time, func()) {
		return ticks, func() { stopped <- struct{}{} }
	})
	s := h.openStream(root, "?include=subagents", nil)
	tr := newTreeReader(t, s, nil)
	tr.readAll(b)

	// A notification lost: the poll that comes with the ping (newTreeHarness)
	// re-reads every session.
	b.emitSilently(c1)
	ticks <- time.Time{}
	// The ping and the event re-read come in either order: the pings have
	// a goroutine of their own, which the stream does not wait for.
	pinged, frames := false, tr.frames
	for !pinged || tr.frames == frames {
		f, err := s.next()
		require.NoError(t, err)
		if f.comment != "" {
			require.Equal(t, "ping", f.comment)
			pinged = true
			continue
		}
		tr.check(f)
	}
	require.EqualValues(t, 2, tr.cursor[c1])

	h.srv.Shutdown()
	tr.readToEOF()
	<-stopped
	requireError(t, h.get("/v1/sessions/"+root+"/events/stream?include=subagents"), http.StatusServiceUnavailable, "unavailable", "")
	requireNoWatches(t, b)
}

func TestTreeStreamErrorsBeforeStreaming(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	c1 := b.create(root)
	other := b.create("")
	h := newTreeHarness(t, b, nil)
	stream := "/v1/sessions/" + root + "/events/stream"
	withID := func(id string) *response {
		return h.do(http.MethodGet, stream+"?include=subagents", nil, map[string]string{"Last-Event-ID": id})
	}

	requireError(t, h.get("/v1/sessions/ses_missing/events/stream?include=subagents"), http.StatusNotFound, "not_found", "")
	requireError(t, h.get(stream+"?include=grandchildren"), http.StatusBadRequest, "invalid_request", "include")
	requireError(t, withID("t1.%%%"), http.StatusBadRequest, "invalid_request", "Last-Event-ID")
	requireError(t, withID("-3"), http.StatusBadRequest, "invalid_request", "Last-Event-ID")
	requireError(t, withID("soon"), http.StatusBadRequest, "invalid_request", "Last-Event-ID")
	requireError(t, h.get(stream+"?include=subagents&after=t1.e30=="), http.StatusBadRequest, "invalid_request", "after")
	requireError(t, h.get(stream+"?include=subagents&after=1&after=2"), http.StatusBadRequest, "invalid_request", "after")

	// A cursor from another tree would skip or repeat events: refused.
	e := requireError(t, withID(lt.TreeCursor{root: 1, other: 1}.String()), http.StatusBadRequest, "invalid_request", "Last-Event-ID")
	require.Contains(t, e.Message, other)
	// A tree cursor on a one-session stream would lose the children's
	// events: refused, saying what to do.
	e = requireError(t, h.do(http.MethodGet, stream, nil, map[string]string{"Last-Event-ID": lt.TreeCursor{root: 1, c1: 1}.String()}),
		http.StatusBadRequest, "invalid_request", "Last-Event-ID")
	require.Contains(t, e.Message, "include=subagents")
	requireError(t, h.get(stream+"?after="+lt.TreeCursor{root: 1}.String()), http.StatusBadRequest, "invalid_request", "after")

	// HEAD answers with the stream's headers and ends.
	head := h.do(http.MethodHead, stream+"?include=subagents", nil, nil)
	require.Equal(t, http.StatusOK, head.status)
	require.Equal(t, "text/event-stream", head.header.Get("Content-Type"))
	require.Empty(t, head.body)
	requireNoWatches(t, b)
}

func TestTreeStreamEndsWhenTheTreeOutgrowsTheBound(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	for b.count() < 999 {
		b.create(root)
	}
	h := newTreeHarness(t, b, nil)
	// Start at the end of every journal, so only what comes is sent.
	end := lt.TreeCursor{}
	for _, id := range b.order {
		end[id] = int64(len(b.journal(id)))
	}
	s := h.openStream(root, "?include=subagents", map[string]string{"Last-Event-ID": end.String()})
	tr := newTreeReader(t, s, end)

	last := b.create(root) // the 1,000th session: still followed
	b.emit(last, 1)
	tr.read(3)
	require.EqualValues(t, 2, tr.cursor[last])

	b.create(root) // the 1,001st: the stream ends rather than drop it
	tr.readToEOF()
	e := requireError(t, h.do(http.MethodGet, "/v1/sessions/"+root+"/events/stream?include=subagents", nil,
		map[string]string{"Last-Event-ID": tr.lastID}), http.StatusBadRequest, "invalid_request", "include")
	require.Contains(t, e.Message, "more than "+strconv.Itoa(1000))
	requireNoWatches(t, b)
}

// TestTreeEndpointsOnTheEngine runs the include=subagents endpoints on the
// real engine: a session without sub-agents is a tree of one.
func TestTreeEndpointsOnTheEngine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sess := h.createSession("a tree of one")
	s := h.openStream(sess.ID, "?include=subagents", nil)
	done := h.waitStatus(sess.ID, lt.SessionIdle)
	journal := h.allEvents(sess.ID, 500)
	require.EqualValues(t, done.LastEventSeq, len(journal))

	tr := newTreeReader(t, s, nil)
	for i := range journal {
		f := s.nextEvent()
		tr.check(f)
		require.Equal(t, string(journal[i]), f.data, "the stream sends the journal's bytes")
	}
	require.Equal(t, lt.TreeCursor{sess.ID: done.LastEventSeq}.String(), tr.lastID)

	r := h.get("/v1/sessions/" + sess.ID + "?include=subagents")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), `"subagents"`)
	actions := decode[lt.List[lt.Action]](t, h.get("/v1/sessions/"+sess.ID+"/actions?include=subagents"))
	require.Empty(t, actions.Data)
}

// TestSubagentTreeOnTheEngine: a session spawns a sub-agent that asks a
// person a question. The parent's tree shows the child and its pending
// action, the tree's actions list it, and the tree stream, opened before
// the spawn, carries both journals whole.
func TestSubagentTreeOnTheEngine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	child := `{"model": {"provider": "scripted", "script": [
	    {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which region?"}}]},
	    {"text": "EU it is"}]},
	  "instructions": "Ask, then answer.", "tools": [{"name": "ask_human"}]}`
	r := h.post("/v1/sessions", `{
	  "agent_spec": {
	    "model": {"provider": "scripted", "script": [
	      {"tool_calls": [{"name": "spawn_agent", "arguments": {"agent_spec": `+child+`, "input": "pick a region"}}]},
	      {"tool_calls": [{"name": "wait_agents", "arguments": {}}]},
	      {"text": "done"}]},
	    "tools": [{"name": "spawn_agent"}, {"name": "wait_agents"}]
	  },
	  "input": "delegate"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	parent := decode[lt.Session](t, r)
	s := h.openStream(parent.ID, "?include=subagents", nil)
	tr := newTreeReader(t, s, nil)

	// Read the stream until the child asks.
	var childID string
	for childID == "" {
		f := s.nextEvent()
		tr.check(f)
		var ev lt.Event
		require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
		if ev.Type == lt.EventActionRequired && ev.SessionID != parent.ID {
			childID = ev.SessionID
		}
	}

	tree := decode[lt.Session](t, h.get("/v1/sessions/"+parent.ID+"?include=subagents"))
	require.Len(t, tree.Subagents, 1)
	kid := tree.Subagents[0]
	require.Equal(t, childID, kid.ID)
	require.Equal(t, parent.ID, *kid.ParentID)
	require.Len(t, kid.RequiredActions, 1)
	act := kid.RequiredActions[0]
	require.Equal(t, "Which region?", act.Question)

	pending := decode[lt.List[lt.Action]](t, h.get("/v1/sessions/"+parent.ID+"/actions?status=pending&include=subagents"))
	require.Len(t, pending.Data, 1)
	require.Equal(t, act.ID, pending.Data[0].ID)
	require.Equal(t, childID, pending.Data[0].SessionID, "the action names the session to decide it on")

	r = h.post("/v1/sessions/"+childID+"/actions/"+act.ID, `{"answer": "EU"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	h.waitStatus(parent.ID, lt.SessionIdle)
	h.waitStatus(childID, lt.SessionIdle)
	want := map[string]int{parent.ID: len(h.allEvents(parent.ID, 500)), childID: len(h.allEvents(childID, 500))}
	for int(tr.cursor[parent.ID]) < want[parent.ID] || int(tr.cursor[childID]) < want[childID] {
		tr.check(s.nextEvent())
	}
	require.Equal(t, want[parent.ID]+want[childID], tr.frames, "both journals, whole, once")
}
