package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// This file holds the workload the crash tests share (TestCrashRecovery on
// one node, the multi-node tests on PostgreSQL): scripted sessions mixing
// read tools, idempotent and irreversible shell commands whose runs are
// recorded outside the server, approvals and durable waits; the operator
// that decides approvals and in-doubt effects from that outside evidence;
// and the checks of the end state against the plan and the world.

// workload is a set of planned sessions and the outside world their shell
// commands write to.
type workload struct {
	t          *testing.T
	ctx        context.Context
	rng        *rand.Rand
	counterLog string // irreversible shell commands append "<label> <step>"
	keysLog    string // idempotent ones append "<key> <label> <step>"

	sessions  []*plannedSession
	byID      map[string]*plannedSession
	byCommand map[string]*shellCall

	// What the operator did.
	happened     int
	didNotHappen int
	approvals    int
	signals      int
}

// newWorkload returns an empty workload whose world is a directory outside
// every workspace.
func newWorkload(t *testing.T, rng *rand.Rand) *workload {
	outside := t.TempDir()
	return &workload{
		t:          t,
		ctx:        t.Context(),
		rng:        rng,
		counterLog: filepath.Join(outside, "irreversible.log"),
		keysLog:    filepath.Join(outside, "idempotency-keys.log"),
		byID:       map[string]*plannedSession{},
		byCommand:  map[string]*shellCall{},
	}
}

// plannedSession is one planned session and what the test knows of it.
type plannedSession struct {
	label        string // e.g. "w1s03"
	irreversible bool   // its shell tool keeps the default effect class
	approval     bool   // a policy asks a person before every shell call
	steps        []planStep
	final        string
	// signal is the name of the signal its wait_for_signal step waits for
	// ("": none); signalSent is set once the operator sent it.
	signal     string
	signalSent bool
	id         string
	done       bool
}

type planStep struct {
	delayMS int
	calls   []planCall
}

type planCall struct {
	tool  string
	args  map[string]any
	shell *shellCall // set for shell calls
}

// isWait reports whether a tool parks the session (no effect, no ledger row).
func isWait(tool string) bool { return tool == "sleep" || tool == "wait_for_signal" }

// shellCall is one shell command of a plan. Mark ("<label> <step>") is
// what the command writes outside the server, so the test can tell from the
// world alone whether it ran.
type shellCall struct {
	session *plannedSession
	step    int
	mark    string
	command string
}

// planSession draws a session of 6 to 10 tool steps and a final text: a
// write first (so reads have something to read), then a mix in which at
// least three steps run a shell command, some steps make two calls, and
// some model calls "think" for a moment (more places for a kill to land).
// Its shell commands sleep 50-300 ms.
func (w *workload) planSession(label string, irreversible bool) *plannedSession {
	cs := &plannedSession{label: label, irreversible: irreversible, final: label + " finished"}
	n := 6 + w.rng.IntN(5)
	shells := 0
	for step := 1; step <= n; step++ {
		var calls []planCall
		switch k := w.rng.IntN(10); {
		case step == 1:
			calls = append(calls, w.notes(label))
		case n-step < 3-shells || k < 5:
			calls = append(calls, w.shell(cs, step, 50, 300))
		case k == 5:
			calls = append(calls, w.write(label, step), w.shell(cs, step, 50, 300))
		default:
			calls = w.readsOrWrite(label, step, k)
		}
		for _, c := range calls {
			if c.shell != nil {
				shells++
			}
		}
		cs.steps = append(cs.steps, planStep{delayMS: w.thinkMS(3, 10, 70), calls: calls})
	}
	return cs
}

// waitKind is the durable wait a mixed session makes, if any.
type waitKind int

const (
	waitNone waitKind = iota
	waitSleep
	waitSignal
)

// planMixedSession draws a short session for the multi-node tests: a
// write, one to three steps of shell commands (sleeping 50-250 ms), reads
// and writes, and, by wait, a sleep (0.2-0.8 s) or a wait_for_signal step at
// a random place, then a final text. The signal is sent by the operator
// (workload.poll) once the session waits for it.
func (w *workload) planMixedSession(label string, irreversible bool, wait waitKind) *plannedSession {
	cs := &plannedSession{label: label, irreversible: irreversible, final: label + " finished"}
	n := 2 + w.rng.IntN(3) // steps after the first write
	waitAt := -1
	if wait != waitNone {
		waitAt = 2 + w.rng.IntN(n)
		n++
	}
	cs.steps = append(cs.steps, planStep{delayMS: w.thinkMS(4, 10, 40), calls: []planCall{w.notes(label)}})
	shellDone := false
	for step := 2; step <= n+1; step++ {
		var calls []planCall
		switch k := w.rng.IntN(10); {
		case step == waitAt && wait == waitSleep:
			calls = []planCall{{tool: "sleep", args: map[string]any{"seconds": float64(20+w.rng.IntN(61)) / 100}}}
		case step == waitAt:
			cs.signal = "go." + label
			calls = []planCall{{tool: "wait_for_signal", args: map[string]any{"name": cs.signal, "timeout_seconds": 3600}}}
		case !shellDone || k < 3:
			calls = []planCall{w.shell(cs, step, 50, 250)}
			shellDone = true
		case k == 3:
			calls = []planCall{w.write(label, step), w.shell(cs, step, 50, 250)}
		default:
			calls = w.readsOrWrite(label, step, k)
		}
		cs.steps = append(cs.steps, planStep{delayMS: w.thinkMS(4, 10, 40), calls: calls})
	}
	return cs
}

// thinkMS is a model delay: with probability 1/oneIn, min to max ms.
func (w *workload) thinkMS(oneIn, minMS, maxMS int) int {
	if w.rng.IntN(oneIn) != 0 {
		return 0
	}
	return minMS + w.rng.IntN(maxMS-minMS)
}

func (w *workload) notes(label string) planCall {
	return planCall{tool: "write_file", args: map[string]any{"path": "notes.md", "content": "# " + label + "\n"}}
}

// write rewrites notes.md, so that what a later read returns tells
// whether the session's workspace followed it (verifyJournal).
func (w *workload) write(label string, step int) planCall {
	return planCall{tool: "write_file", args: map[string]any{
		"path": "notes.md", "content": fmt.Sprintf("# %s\nstep %d\n", label, step),
	}}
}

// readsOrWrite is a step without a shell command, chosen by k (6-9).
func (w *workload) readsOrWrite(label string, step, k int) []planCall {
	switch k {
	case 6:
		return []planCall{{tool: "read_file", args: map[string]any{"path": "notes.md"}}}
	case 7:
		return []planCall{{tool: "list_files", args: map[string]any{"path": "."}}}
	case 8:
		return []planCall{w.write(label, step)}
	default:
		return []planCall{{tool: "read_file", args: map[string]any{"path": "notes.md"}},
			{tool: "list_files", args: map[string]any{}}}
	}
}

// shell plans the shell call of step: it appends its mark (with the
// idempotency key the server hands it, when idempotent) to a log outside
// the workspace, then sleeps minMS-maxMS so that kills land mid-effect.
// The mark is written first, so once the command started sleeping the world
// says it happened.
func (w *workload) shell(cs *plannedSession, step, minMS, maxMS int) planCall {
	sc := &shellCall{session: cs, step: step, mark: fmt.Sprintf("%s %d", cs.label, step)}
	sleep := fmt.Sprintf("%.2f", (float64(minMS)+float64(maxMS-minMS)*w.rng.Float64())/1000)
	if cs.irreversible {
		sc.command = fmt.Sprintf("printf '%%s\\n' %s >> %s; sleep %s", shellQuote(sc.mark), shellQuote(w.counterLog), sleep)
	} else {
		sc.command = fmt.Sprintf(`printf '%%s %%s\n' "$LONGHAUL_IDEMPOTENCY_KEY" %s >> %s; sleep %s`,
			shellQuote(sc.mark), shellQuote(w.keysLog), sleep)
	}
	w.byCommand[sc.command] = sc
	return planCall{tool: "shell", args: map[string]any{"command": sc.command}, shell: sc}
}

// script is the scripted provider's script of the plan (API.md "The
// scripted model provider").
func (cs *plannedSession) script(t *testing.T) json.RawMessage {
	type toolCall struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	type step struct {
		Text      string     `json:"text,omitempty"`
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
		DelayMS   int        `json:"delay_ms,omitempty"`
	}
	var steps []step
	for _, ps := range cs.steps {
		s := step{DelayMS: ps.delayMS}
		for _, c := range ps.calls {
			s.ToolCalls = append(s.ToolCalls, toolCall{Name: c.tool, Arguments: c.args})
		}
		steps = append(steps, s)
	}
	steps = append(steps, step{Text: cs.final})
	raw, err := json.Marshal(steps)
	require.NoError(t, err)
	return raw
}

// create creates the planned session through api.
func (w *workload) create(api *client.Client, cs *plannedSession) {
	w.t.Helper()
	sess, err := api.CreateSession(w.ctx, w.request(cs))
	require.NoError(w.t, err, "create session %s", cs.label)
	w.register(cs, sess.ID)
}

// createAll creates the planned sessions, several at a time, each through
// the node api() picks for it.
func (w *workload) createAll(api func() *client.Client, plans []*plannedSession) {
	w.t.Helper()
	const parallel = 8
	ids := make([]string, len(plans))
	errs := make([]error, len(plans))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, cs := range plans {
		req, c := w.request(cs), api()
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sess, err := c.CreateSession(w.ctx, req)
			if err == nil {
				ids[i] = sess.ID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, cs := range plans {
		require.NoError(w.t, errs[i], "create session %s", cs.label)
		w.register(cs, ids[i])
	}
}

// request is the creation request of a planned session: the tools its plan
// uses (shell overridden to idempotent unless the session is irreversible),
// and a policy that asks before every shell call when it wants approvals.
func (w *workload) request(cs *plannedSession) *lt.CreateSessionRequest {
	w.t.Helper()
	tools := []lt.ToolSpec{{Name: "shell"}, {Name: "write_file"}, {Name: "read_file"}, {Name: "list_files"}}
	if !cs.irreversible {
		tools[0].Effect = lt.EffectIdempotent
	}
	waits := map[string]bool{}
	for _, ps := range cs.steps {
		for _, c := range ps.calls {
			if isWait(c.tool) && !waits[c.tool] {
				waits[c.tool] = true
				tools = append(tools, lt.ToolSpec{Name: c.tool})
			}
		}
	}
	var policies []lt.Policy
	if cs.approval {
		policies = []lt.Policy{{Name: "shell-review", Tool: "shell", Decision: lt.PolicyAsk, Reason: "commands need a look"}}
	}
	return &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:        lt.ModelSpec{Provider: "scripted", Name: "crash-" + cs.label, Script: cs.script(w.t)},
			Instructions: "Follow the script.",
			Tools:        tools,
			Policies:     policies,
		},
		Input: "crash test session " + cs.label,
		Goal:  "finish every step exactly once in the world",
	}
}

// register records the id of a created session.
func (w *workload) register(cs *plannedSession, id string) {
	cs.id = id
	w.sessions = append(w.sessions, cs)
	w.byID[id] = cs
}

// poll reads every session once through api(), decides the pending
// actions, sends the signals the waiting sessions wait for, and returns the
// sum of the sessions' last seqs (the test's progress measure). api is
// called for each request, so that a test with several nodes spreads them.
// A session that failed or was cancelled fails the test at once.
func (w *workload) poll(api func() *client.Client) int64 {
	w.t.Helper()
	l, err := api().ListSessions(w.ctx, client.ListSessionsParams{Limit: client.MaxListLimit})
	require.NoError(w.t, err)
	require.Len(w.t, l.Data, len(w.sessions), "GET /v1/sessions lists every session")
	var total int64
	for _, s := range l.Data {
		cs := w.byID[s.ID]
		require.NotNil(w.t, cs, "unknown session %s", s.ID)
		total += s.LastEventSeq
		switch s.Status {
		case lt.SessionIdle:
			cs.done = true
		case lt.SessionFailed, lt.SessionCancelled:
			w.t.Fatalf("session %s (%s) is %s (stop reason %v); journal:\n%s",
				cs.label, s.ID, s.Status, deref(s.StopReason), describeJournal(journal(w.ctx, w.t, api(), s.ID)))
		case lt.SessionRequiresAction:
			w.decide(api(), cs)
		case lt.SessionWaiting:
			if cs.signal != "" && !cs.signalSent {
				w.sendSignal(api(), cs)
			}
		}
	}
	return total
}

// sendSignal sends the signal cs waits for. Its only wait is for that
// signal, so the signal must find the wait.
func (w *workload) sendSignal(api *client.Client, cs *plannedSession) {
	w.t.Helper()
	sig, err := api.SendSignal(w.ctx, cs.id, &lt.SignalRequest{Name: cs.signal, Payload: json.RawMessage(`{"label":"` + cs.label + `"}`)})
	require.NoError(w.t, err, "signal session %s", cs.label)
	require.True(w.t, sig.Delivered, "session %s waits for %s, yet the signal was kept rather than delivered", cs.label, cs.signal)
	cs.signalSent = true
	w.signals++
}

// decide settles every pending action of cs. Approvals are granted for
// exactly the arguments shown. Otherwise only in-doubt effects of
// irreversible shell calls may be pending: the decision comes from the
// counter file, never from the server. The line is there → the command ran
// (happened); it is not → it did not run (did_not_happen, and the server
// runs it again). The server that ran it is dead (its kill waited for it,
// and the kernel killed its shells with it) or has lost its lease long
// after the command wrote its line (which it does first), so no late write
// can change the answer.
func (w *workload) decide(api *client.Client, cs *plannedSession) {
	w.t.Helper()
	l, err := api.ListActions(w.ctx, cs.id, lt.ActionPending)
	require.NoError(w.t, err)
	for _, a := range l.Data {
		if a.Type == lt.ActionApproval {
			require.True(w.t, cs.approval, "session %s: approval without a policy: %+v", cs.label, a)
			require.Equal(w.t, "shell", a.Tool, "session %s: approval of another tool: %+v", cs.label, a)
			require.Equal(w.t, "shell-review", a.Policy)
			got, err := api.DecideAction(w.ctx, cs.id, a.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: a.ArgumentsSHA256})
			require.NoError(w.t, err, "approve action %s of session %s", a.ID, cs.label)
			require.Equal(w.t, lt.ActionResolved, got.Status)
			w.approvals++
			continue
		}
		require.Equal(w.t, lt.ActionInDoubt, a.Type, "session %s: unexpected pending action %+v", cs.label, a)
		require.Equal(w.t, "shell", a.Tool, "session %s: in-doubt action on a tool without an irreversible class: %+v", cs.label, a)
		require.True(w.t, cs.irreversible, "session %s: in-doubt action on an idempotent shell call: %+v", cs.label, a)
		var args struct {
			Command string `json:"command"`
		}
		require.NoError(w.t, json.Unmarshal(a.Arguments, &args))
		sc := w.byCommand[args.Command]
		require.NotNil(w.t, sc, "session %s: in-doubt action names a command not in the plan: %q", cs.label, args.Command)
		require.Same(w.t, cs, sc.session, "in-doubt action of session %s names a command of session %s", cs.label, sc.session.label)
		d := &lt.Decision{Decision: lt.DecisionDidNotHappen}
		if w.counterLines()[sc.mark] > 0 {
			d = &lt.Decision{Decision: lt.DecisionHappened, Output: json.RawMessage(
				`{"exit_code":0,"stdout":"","stderr":"","truncated":false,"timed_out":false}`)}
			w.happened++
		} else {
			w.didNotHappen++
		}
		got, err := api.DecideAction(w.ctx, cs.id, a.ID, d)
		require.NoError(w.t, err, "decide in-doubt action %s of session %s", a.ID, cs.label)
		require.Equal(w.t, lt.ActionResolved, got.Status)
	}
}

func (w *workload) allDone() bool {
	for _, cs := range w.sessions {
		if !cs.done {
			return false
		}
	}
	return true
}

// counterLines counts the lines of the irreversible counter file.
func (w *workload) counterLines() map[string]int {
	w.t.Helper()
	counts := map[string]int{}
	for _, line := range readLines(w.t, w.counterLog) {
		counts[line]++
	}
	return counts
}

// workloadStats are counts the verification derives from the journals.
type workloadStats struct {
	events             int
	irreversibleReruns int
	idempotentReruns   int
	readReruns         int
	// workers counts the sessions by how many workers (nodes) wrote their
	// journal: 1, 2, 3...
	workers map[int]int
}

// verify checks the end state of every session against its plan and the
// outside world, reading through api.
func (w *workload) verify(api *client.Client) workloadStats {
	w.t.Helper()
	st := workloadStats{workers: map[int]int{}}

	// The world: one line per irreversible command, none twice; every
	// idempotent run recorded one key per (session, step).
	counter := w.counterLines()
	for line, n := range counter {
		require.Equal(w.t, 1, n, "irreversible command %q ran %d times", line, n)
	}
	keys := map[string][]string{} // mark -> keys seen by each run
	for _, line := range readLines(w.t, w.keysLog) {
		key, mark, ok := strings.Cut(line, " ")
		require.True(w.t, ok, "malformed key log line %q", line)
		keys[mark] = append(keys[mark], key)
	}
	planned := map[string]bool{}

	for _, cs := range w.sessions {
		sess, err := api.GetSession(w.ctx, cs.id)
		require.NoError(w.t, err)
		require.Equal(w.t, lt.SessionIdle, sess.Status, "session %s", cs.label)
		require.Empty(w.t, sess.RequiredActions, "session %s", cs.label)
		evs := journal(w.ctx, w.t, api, cs.id)
		requireGapFree(w.t, cs.id, evs)
		require.Equal(w.t, sess.LastEventSeq, int64(len(evs)), "session %s: last_event_seq vs journal length", cs.label)
		st.events += len(evs)
		workers := map[string]bool{}
		for _, ev := range evs {
			if ev.WorkerID != "" {
				workers[ev.WorkerID] = true
			}
		}
		st.workers[len(workers)]++
		calls := w.verifyJournal(cs, evs, &st)

		for _, ps := range cs.steps {
			for _, pc := range ps.calls {
				if pc.shell == nil {
					continue
				}
				sc := pc.shell
				planned[sc.mark] = true
				jc := calls.byCommand[sc.command]
				require.NotNil(w.t, jc, "session %s: shell call of step %d is not in the journal", cs.label, sc.step)
				if cs.irreversible {
					require.Equal(w.t, 1, counter[sc.mark], "irreversible command %q: lines in the counter file", sc.mark)
					continue
				}
				seen := keys[sc.mark]
				require.NotEmpty(w.t, seen, "idempotent command %q never ran", sc.mark)
				for _, k := range seen {
					require.Equal(w.t, jc.key, k, "idempotent command %q ran with a key other than the journal's", sc.mark)
				}
			}
		}
		w.verifyLedger(api, cs, calls)
	}
	for mark := range counter {
		require.True(w.t, planned[mark], "counter line %q belongs to no planned command", mark)
	}
	for mark := range keys {
		require.True(w.t, planned[mark], "key log line for %q belongs to no planned command", mark)
	}
	return st
}

// journalCall is what a session's journal says about one tool call.
type journalCall struct {
	callID        string
	tool          string
	kind          string
	class         lt.EffectClass
	args          json.RawMessage
	command       string
	key           string // idempotency key of its tool.started events
	effectID      string
	started       int
	waits         int // wait.started events of a sleep or wait_for_signal
	ended         int
	output        json.RawMessage
	resolution    string
	actions       []string // its in-doubt actions
	didNotHappens int
	approvals     int // approval actions raised for it
	approved      bool
	// notes is the content a write_file call puts in notes.md (nil: the
	// call writes nothing there).
	notes *string
}

type journalCalls struct {
	byID      map[string]*journalCall
	byCommand map[string]*journalCall
}

// verifyJournal checks one journal against the plan: the turn completed
// with the final text, each step's model call was answered exactly once,
// each planned call was requested in its step, ended exactly once, and
// started again only as the rules allow: an irreversible call once plus
// once per did_not_happen decision, others whenever a crash interrupted
// them but always with the same key; a wait ended with its timer or its
// signal.
func (w *workload) verifyJournal(cs *plannedSession, evs []lt.Event, st *workloadStats) journalCalls {
	w.t.Helper()
	calls := journalCalls{byID: map[string]*journalCall{}, byCommand: map[string]*journalCall{}}
	actionCall := map[string]*journalCall{}
	var order []*journalCall
	completed := 0
	responded := map[int]int{} // step -> model.responded events
	// What notes.md holds by the journal: every completed write, except
	// that a restored workspace holds what the checkpoint it was restored
	// from saw (and a recreated one nothing). A read must return exactly
	// that, on whichever node it runs.
	notes, notesAt := "", map[string]string{} // checkpoint id -> notes.md
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventCheckpointCreated:
			var d struct {
				Checkpoint lt.Checkpoint `json:"checkpoint"`
			}
			decode(w.t, ev, &d)
			if d.Checkpoint.Snapshot != "" {
				notesAt[d.Checkpoint.ID] = notes
			}
		case lt.EventEnvironmentRestored:
			var d struct {
				CheckpointID string   `json:"checkpoint_id"`
				Replayed     []string `json:"replayed"`
			}
			decode(w.t, ev, &d)
			at, ok := notesAt[d.CheckpointID]
			require.True(w.t, ok || d.CheckpointID == "", "session %s: seq %d restores from unknown checkpoint %q", cs.label, ev.Seq, d.CheckpointID)
			notes = at
			// The idempotent calls made since the checkpoint ran again.
			for _, id := range d.Replayed {
				c := calls.byID[id]
				require.NotNil(w.t, c, "session %s: seq %d replays unknown call %s", cs.label, ev.Seq, id)
				if c.notes != nil {
					notes = *c.notes
				}
			}
		case lt.EventModelResponded:
			responded[ev.Step]++
			require.Equal(w.t, 1, responded[ev.Step], "session %s: seq %d answers the model call of step %d again after it completed", cs.label, ev.Seq, ev.Step)
		case lt.EventToolRequested:
			var d struct {
				CallID    string          `json:"call_id"`
				Tool      string          `json:"tool"`
				Kind      string          `json:"kind"`
				Class     lt.EffectClass  `json:"effect"`
				Arguments json.RawMessage `json:"arguments"`
			}
			decode(w.t, ev, &d)
			require.Nil(w.t, calls.byID[d.CallID], "session %s: call %s requested twice", cs.label, d.CallID)
			wantKind := "builtin"
			if isWait(d.Tool) {
				wantKind = "wait"
			}
			require.Equal(w.t, wantKind, d.Kind, "session %s: call %s (%s) was not accepted: %s", cs.label, d.CallID, d.Tool, ev.Data)
			c := &journalCall{callID: d.CallID, tool: d.Tool, kind: d.Kind, class: d.Class, args: d.Arguments}
			if d.Tool == "write_file" || d.Tool == "read_file" {
				var args struct {
					Path    string `json:"path"`
					Content string `json:"content"`
				}
				require.NoError(w.t, json.Unmarshal(d.Arguments, &args))
				require.Equal(w.t, "notes.md", args.Path, "session %s: %s call %s", cs.label, d.Tool, d.CallID)
				if d.Tool == "write_file" {
					c.notes = &args.Content
				}
			}
			if d.Tool == "shell" {
				var args struct {
					Command string `json:"command"`
				}
				require.NoError(w.t, json.Unmarshal(d.Arguments, &args))
				c.command = args.Command
				calls.byCommand[c.command] = c
			}
			calls.byID[c.callID] = c
			order = append(order, c)
		case lt.EventToolStarted:
			var d struct {
				CallID   string `json:"call_id"`
				EffectID string `json:"effect_id"`
				Key      string `json:"idempotency_key"`
			}
			decode(w.t, ev, &d)
			c := calls.byID[d.CallID]
			require.NotNil(w.t, c, "session %s: seq %d starts an unknown call", cs.label, ev.Seq)
			require.Zero(w.t, c.ended, "session %s: seq %d starts call %s after it ended", cs.label, ev.Seq, c.callID)
			require.NotEmpty(w.t, d.Key, "session %s: seq %d has no idempotency key", cs.label, ev.Seq)
			if c.started > 0 {
				require.Equal(w.t, c.key, d.Key, "session %s: call %s started again with another idempotency key", cs.label, c.callID)
				require.Equal(w.t, c.effectID, d.EffectID, "session %s: call %s started again with another effect id", cs.label, c.callID)
			}
			if cs.approval && c.tool == "shell" {
				require.True(w.t, c.approved, "session %s: call %s started (seq %d) before it was approved", cs.label, c.callID, ev.Seq)
			}
			if c.class == lt.EffectIrreversible {
				require.Equal(w.t, c.started, c.didNotHappens,
					"session %s: irreversible call %s started again (seq %d) without a did_not_happen decision", cs.label, c.callID, ev.Seq)
			}
			c.key, c.effectID = d.Key, d.EffectID
			c.started++
		case lt.EventWaitStarted:
			var d struct {
				CallID string `json:"call_id"`
			}
			decode(w.t, ev, &d)
			c := calls.byID[d.CallID]
			require.NotNil(w.t, c, "session %s: seq %d waits for an unknown call", cs.label, ev.Seq)
			require.True(w.t, isWait(c.tool), "session %s: seq %d waits for a %s call", cs.label, ev.Seq, c.tool)
			require.Zero(w.t, c.ended, "session %s: seq %d waits for call %s after it ended", cs.label, ev.Seq, c.callID)
			c.waits++
		case lt.EventToolCompleted, lt.EventToolFailed:
			var d struct {
				CallID     string          `json:"call_id"`
				Error      string          `json:"error"`
				Resolution string          `json:"resolution"`
				Output     json.RawMessage `json:"output"`
			}
			decode(w.t, ev, &d)
			c := calls.byID[d.CallID]
			require.NotNil(w.t, c, "session %s: seq %d ends an unknown call", cs.label, ev.Seq)
			require.Equal(w.t, lt.EventToolCompleted, ev.Type, "session %s: call %s (%s) failed: %s", cs.label, c.callID, c.tool, d.Error)
			c.ended++
			c.resolution = d.Resolution
			c.output = d.Output
			switch {
			case c.notes != nil:
				notes = *c.notes
			case c.tool == "read_file":
				var out struct {
					Content string `json:"content"`
				}
				require.NoError(w.t, json.Unmarshal(d.Output, &out), "session %s: output of read_file call %s", cs.label, c.callID)
				require.Equal(w.t, notes, out.Content, "session %s: read_file call %s (seq %d) read a workspace that is not the session's latest; journal:\n%s", cs.label, c.callID, ev.Seq, describeJournal(evs))
			}
		case lt.EventActionRequired:
			var d struct {
				Action lt.Action `json:"action"`
			}
			decode(w.t, ev, &d)
			c := calls.byID[d.Action.CallID]
			require.NotNil(w.t, c, "session %s: action %s names an unknown call", cs.label, d.Action.ID)
			actionCall[d.Action.ID] = c
			if d.Action.Type == lt.ActionApproval {
				require.True(w.t, cs.approval && c.tool == "shell", "session %s: unexpected approval %s", cs.label, d.Action.ID)
				require.Zero(w.t, c.started, "session %s: approval %s asked after call %s started", cs.label, d.Action.ID, c.callID)
				c.approvals++
				continue
			}
			require.Equal(w.t, lt.ActionInDoubt, d.Action.Type, "session %s: unexpected action %s", cs.label, d.Action.ID)
			require.Equal(w.t, lt.EffectIrreversible, c.class, "session %s: %s call %s went in doubt", cs.label, c.class, c.callID)
			c.actions = append(c.actions, d.Action.ID)
		case lt.EventActionResolved:
			var d struct {
				ActionID string      `json:"action_id"`
				Decision lt.Decision `json:"decision"`
			}
			decode(w.t, ev, &d)
			c := actionCall[d.ActionID]
			require.NotNil(w.t, c, "session %s: seq %d resolves an unknown action", cs.label, ev.Seq)
			switch d.Decision.Decision {
			case lt.DecisionDidNotHappen:
				c.didNotHappens++
			case lt.DecisionApprove:
				c.approved = true
			}
		case lt.EventTurnCompleted:
			var d struct {
				Output string `json:"output"`
			}
			decode(w.t, ev, &d)
			require.Equal(w.t, cs.final, d.Output, "session %s: turn output", cs.label)
			completed++
		}
	}
	require.Equal(w.t, 1, completed, "session %s: turn.completed events", cs.label)
	last := evs[len(evs)-1]
	require.Equal(w.t, lt.EventSessionStatusChanged, last.Type, "session %s: last event", cs.label)
	require.Contains(w.t, string(last.Data), `"to":"idle"`, "session %s: last event", cs.label)
	// One model call per planned step and one for the final text, each
	// answered once.
	for step := 1; step <= len(cs.steps)+1; step++ {
		require.Equal(w.t, 1, responded[step], "session %s: model.responded events of step %d", cs.label, step)
	}
	require.Len(w.t, responded, len(cs.steps)+1, "session %s: steps with a model answer", cs.label)

	// The journal holds the plan's calls, in order, with the classes the
	// agent gave them.
	var want []string
	for _, ps := range cs.steps {
		for _, pc := range ps.calls {
			want = append(want, pc.tool)
		}
	}
	var got []string
	for _, c := range order {
		got = append(got, c.tool)
		require.Equal(w.t, 1, c.ended, "session %s: call %s (%s) ended %d times", cs.label, c.callID, c.tool, c.ended)
		if isWait(c.tool) {
			w.verifyWait(cs, c)
			continue
		}
		require.Positive(w.t, c.started, "session %s: call %s (%s) never started", cs.label, c.callID, c.tool)
		if cs.approval && c.tool == "shell" {
			require.Equal(w.t, 1, c.approvals, "session %s: call %s was asked about %d times (an approval is asked once)", cs.label, c.callID, c.approvals)
		}
		switch c.tool {
		case "shell":
			wantClass := lt.EffectIdempotent
			if cs.irreversible {
				wantClass = lt.EffectIrreversible
			}
			require.Equal(w.t, wantClass, c.class, "session %s: class of call %s", cs.label, c.callID)
		case "write_file":
			require.Equal(w.t, lt.EffectIdempotent, c.class, "session %s: class of call %s", cs.label, c.callID)
		default:
			require.Equal(w.t, lt.EffectRead, c.class, "session %s: class of call %s", cs.label, c.callID)
		}
		switch c.class {
		case lt.EffectIrreversible:
			require.Equal(w.t, 1+c.didNotHappens, c.started, "session %s: irreversible call %s starts", cs.label, c.callID)
			st.irreversibleReruns += c.started - 1
		case lt.EffectIdempotent:
			st.idempotentReruns += c.started - 1
		default:
			st.readReruns += c.started - 1
		}
	}
	require.Equal(w.t, want, got, "session %s: tool calls in the journal", cs.label)
	return calls
}

// verifyWait checks a sleep or wait_for_signal call: it waited (durably,
// without an effect) and ended with its timer or with the operator's signal,
// not with a timeout.
func (w *workload) verifyWait(cs *plannedSession, c *journalCall) {
	w.t.Helper()
	require.Positive(w.t, c.waits, "session %s: %s call %s never waited", cs.label, c.tool, c.callID)
	require.Zero(w.t, c.started, "session %s: %s call %s has an effect", cs.label, c.tool, c.callID)
	require.Equal(w.t, lt.EffectRead, c.class, "session %s: class of call %s", cs.label, c.callID)
	var out struct {
		SleptUntil string          `json:"slept_until"`
		Signal     string          `json:"signal"`
		Payload    json.RawMessage `json:"payload"`
		TimedOut   bool            `json:"timed_out"`
	}
	require.NoError(w.t, json.Unmarshal(c.output, &out), "session %s: output of %s call %s: %s", cs.label, c.tool, c.callID, c.output)
	if c.tool == "sleep" {
		require.NotEmpty(w.t, out.SleptUntil, "session %s: sleep call %s output %s", cs.label, c.callID, c.output)
		return
	}
	require.False(w.t, out.TimedOut, "session %s: wait_for_signal call %s timed out", cs.label, c.callID)
	require.Equal(w.t, cs.signal, out.Signal, "session %s: signal that ended call %s", cs.label, c.callID)
	require.JSONEq(w.t, `{"label":"`+cs.label+`"}`, string(out.Payload), "session %s: payload of the signal", cs.label)
}

// verifyLedger checks the effect ledger: one row per call that is not a
// wait, none left started or in doubt, each with its call's key, and every
// irreversible one known to have happened (by running or by a decision).
func (w *workload) verifyLedger(api *client.Client, cs *plannedSession, calls journalCalls) {
	w.t.Helper()
	l, err := api.ListEffects(w.ctx, cs.id)
	require.NoError(w.t, err)
	require.Nil(w.t, l.NextCursor, "session %s: the ledger fits one page", cs.label)
	effects := 0
	for _, c := range calls.byID {
		if !isWait(c.tool) {
			effects++
		}
	}
	require.Len(w.t, l.Data, effects, "session %s: one ledger row per call that is not a wait", cs.label)
	for _, e := range l.Data {
		c := calls.byID[e.CallID]
		require.NotNil(w.t, c, "session %s: effect %s names an unknown call %s", cs.label, e.ID, e.CallID)
		require.Equal(w.t, c.effectID, e.ID, "session %s: effect id of call %s", cs.label, c.callID)
		require.Equal(w.t, c.key, e.IdempotencyKey, "session %s: key of effect %s", cs.label, e.ID)
		require.Equal(w.t, c.class, e.Class, "session %s: class of effect %s", cs.label, e.ID)
		require.NotEqual(w.t, lt.EffectStarted, e.Status, "session %s: effect %s is still started", cs.label, e.ID)
		require.NotEqual(w.t, lt.EffectInDoubt, e.Status, "session %s: effect %s is still in doubt", cs.label, e.ID)
		require.Equal(w.t, c.started, e.Attempts, "session %s: attempts of effect %s", cs.label, e.ID)
		if e.Class == lt.EffectIrreversible && c.resolution == lt.DecisionHappened {
			require.Equal(w.t, lt.EffectResolved, e.Status, "session %s: effect %s decided happened", cs.label, e.ID)
			require.Equal(w.t, lt.DecisionHappened, e.Resolution, "session %s: effect %s", cs.label, e.ID)
		} else {
			require.Equal(w.t, lt.EffectSucceeded, e.Status, "session %s: effect %s (%s)", cs.label, e.ID, e.Tool)
		}
	}
}

func decode(t *testing.T, ev lt.Event, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(ev.Data, v), "decode %s (seq %d): %s", ev.Type, ev.Seq, ev.Data)
}

// readLines returns the non-empty lines of path; a missing file has none.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var lines []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// describeJournal renders a journal for a failure message.
func describeJournal(evs []lt.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%4d %-24s step=%d worker=%s %s\n", ev.Seq, ev.Type, ev.Step, ev.WorkerID, ev.Data)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
