package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The crash test's size. A wave is a batch of sessions created together; a
// new wave starts when the previous one has finished before the planned
// kills are spent, so the kill count never depends on how fast this machine
// runs the sessions.
const (
	crashSessionsPerWave = 12
	crashMinKills        = 50
	crashPlannedKills    = 56
	crashMaxWaves        = 8
	// crashSettleTimeout bounds the quiet phase after the last kill, in
	// which every session must finish.
	crashSettleTimeout = 90 * time.Second
)

// TestCrashRecovery SIGKILLs the server at many points while scripted
// sessions run read tools (read_file, list_files), idempotent effects
// (write_file, and shell overridden to idempotent, which records its
// idempotency key outside the server) and irreversible effects (shell, which
// appends a line to a counter file outside the server). After every restart
// it decides each in-doubt effect from that outside evidence, as an operator
// would. Then every session must have finished its turn with a gap-free
// journal, no irreversible command may have run twice (nor be missing), and
// every run of an idempotent command must have seen the one key the journal
// recorded for its call (DESIGN.md principle 3).
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	began := time.Now()
	seed1, seed2 := rand.Uint64(), rand.Uint64()
	t.Logf("kill-point seed: %d %d (the assertions hold for any seed)", seed1, seed2)

	outside := t.TempDir() // the "world": outside every workspace
	run := &crashRun{
		t:   t,
		ctx: t.Context(),
		rng: rand.New(rand.NewPCG(seed1, seed2)),
		// The shell commands record what ran in files outside the
		// workspace (the test's evidence, independent of the server): a
		// sandbox rightly forbids that, so this test runs them locally.
		srv:        startServer(t, "--sandbox", "local"),
		counterLog: filepath.Join(outside, "irreversible.log"),
		keysLog:    filepath.Join(outside, "idempotency-keys.log"),
		byCommand:  map[string]*shellCall{},
	}
	run.createWave()
	for run.kills < crashPlannedKills {
		if run.allDone() {
			if run.waves == crashMaxWaves {
				break
			}
			run.createWave()
		}
		run.runToKillPoint()
		run.srv.restart()
		run.kills++
	}
	run.settle()
	require.GreaterOrEqual(t, run.kills, crashMinKills,
		"the server was killed only %d times: %d waves of sessions finished too fast", run.kills, run.waves)

	st := run.verify()
	t.Logf("crash recovery: %d kills (%s), %d sessions in %d waves, %d events; %d approvals; in-doubt decisions: %d happened, %d did_not_happen; "+
		"re-runs after a crash: %d irreversible (after did_not_happen), %d idempotent, %d read; "+
		"%d restarts refused for a data directory still locked; %s in all",
		run.kills, run.killModes(), len(run.sessions), run.waves, st.events, run.approvals, run.happened, run.didNotHappen,
		st.irreversibleReruns, st.idempotentReruns, st.readReruns, run.srv.lockRefusals, time.Since(began).Round(time.Millisecond))
}

// crashRun is the state of one crash test.
type crashRun struct {
	t          *testing.T
	ctx        context.Context
	rng        *rand.Rand
	srv        *server
	counterLog string // irreversible shell commands append "<label> <step>"
	keysLog    string // idempotent ones append "<key> <label> <step>"

	sessions  []*crashSession
	byID      map[string]*crashSession
	byCommand map[string]*shellCall
	waves     int

	kills        int
	modes        map[string]int
	happened     int
	didNotHappen int
	approvals    int
}

// crashSession is one planned session and what the test knows of it.
type crashSession struct {
	label        string // e.g. "w1s03"
	irreversible bool   // its shell tool keeps the default effect class
	approval     bool   // a policy asks a person before every shell call
	steps        []planStep
	final        string
	id           string
	done         bool
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

// shellCall is one shell command of a plan. Mark ("<label> <step>") is
// what the command writes outside the server, so the test can tell from the
// world alone whether it ran.
type shellCall struct {
	session *crashSession
	step    int
	mark    string
	command string
}

func (r *crashRun) createWave() {
	r.t.Helper()
	r.waves++
	if r.byID == nil {
		r.byID = map[string]*crashSession{}
	}
	for i := range crashSessionsPerWave {
		cs := r.planSession(fmt.Sprintf("w%ds%02d", r.waves, i+1), i%2 == 0)
		cs.approval = i%3 == 1
		tools := []lt.ToolSpec{{Name: "shell"}, {Name: "write_file"}, {Name: "read_file"}, {Name: "list_files"}}
		if !cs.irreversible {
			tools[0].Effect = lt.EffectIdempotent
		}
		var policies []lt.Policy
		if cs.approval {
			policies = []lt.Policy{{Name: "shell-review", Tool: "shell", Decision: lt.PolicyAsk, Reason: "commands need a look"}}
		}
		sess, err := r.srv.api.CreateSession(r.ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{
				Model:        lt.ModelSpec{Provider: "scripted", Name: "crash-" + cs.label, Script: cs.script(r.t)},
				Instructions: "Follow the script.",
				Tools:        tools,
				Policies:     policies,
			},
			Input: "crash test session " + cs.label,
			Goal:  "finish every step exactly once in the world",
		})
		require.NoError(r.t, err, "create session %s", cs.label)
		cs.id = sess.ID
		r.sessions = append(r.sessions, cs)
		r.byID[cs.id] = cs
	}
}

// planSession draws a session of 6 to 10 tool steps and a final text: a
// write first (so reads have something to read), then a mix in which at
// least three steps run a shell command, some steps make two calls, and
// some model calls "think" for a moment (more places for a kill to land).
func (r *crashRun) planSession(label string, irreversible bool) *crashSession {
	cs := &crashSession{label: label, irreversible: irreversible, final: label + " finished"}
	n := 6 + r.rng.IntN(5)
	shells := 0
	for step := 1; step <= n; step++ {
		var calls []planCall
		write := planCall{tool: "write_file", args: map[string]any{
			"path": fmt.Sprintf("out-%d.txt", step), "content": fmt.Sprintf("%s step %d\n", label, step),
		}}
		switch k := r.rng.IntN(10); {
		case step == 1:
			calls = append(calls, planCall{tool: "write_file", args: map[string]any{"path": "notes.md", "content": "# " + label + "\n"}})
		case n-step < 3-shells || k < 5:
			calls = append(calls, r.shell(cs, step))
		case k == 5:
			calls = append(calls, write, r.shell(cs, step))
		case k == 6:
			calls = append(calls, planCall{tool: "read_file", args: map[string]any{"path": "notes.md"}})
		case k == 7:
			calls = append(calls, planCall{tool: "list_files", args: map[string]any{"path": "."}})
		case k == 8:
			calls = append(calls, write)
		default:
			calls = append(calls, planCall{tool: "read_file", args: map[string]any{"path": "notes.md"}},
				planCall{tool: "list_files", args: map[string]any{}})
		}
		for _, c := range calls {
			if c.shell != nil {
				shells++
			}
		}
		delay := 0
		if r.rng.IntN(3) == 0 {
			delay = 10 + r.rng.IntN(60)
		}
		cs.steps = append(cs.steps, planStep{delayMS: delay, calls: calls})
	}
	return cs
}

// shell plans the shell call of step: it appends its mark (with the
// idempotency key the server hands it, when idempotent) to a log outside
// the workspace, then sleeps 50-300 ms so that kills land mid-effect.
func (r *crashRun) shell(cs *crashSession, step int) planCall {
	sc := &shellCall{session: cs, step: step, mark: fmt.Sprintf("%s %d", cs.label, step)}
	sleep := fmt.Sprintf("%.2f", 0.05+0.25*r.rng.Float64())
	if cs.irreversible {
		sc.command = fmt.Sprintf("printf '%%s\\n' %s >> %s; sleep %s", shellQuote(sc.mark), shellQuote(r.counterLog), sleep)
	} else {
		sc.command = fmt.Sprintf(`printf '%%s %%s\n' "$LONGHAUL_IDEMPOTENCY_KEY" %s >> %s; sleep %s`,
			shellQuote(sc.mark), shellQuote(r.keysLog), sleep)
	}
	r.byCommand[sc.command] = sc
	return planCall{tool: "shell", args: map[string]any{"command": sc.command}, shell: sc}
}

// script is the scripted provider's script of the plan (API.md "The
// scripted model provider").
func (cs *crashSession) script(t *testing.T) json.RawMessage {
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

// runToKillPoint lets the server run until a kill point drawn at random:
// right after the restart (while it recovers), after a random delay, or
// after a random number of new journal events. Meanwhile it decides the
// in-doubt effects the recovery raised.
func (r *crashRun) runToKillPoint() {
	r.t.Helper()
	if r.modes == nil {
		r.modes = map[string]int{}
	}
	var mode string
	var until time.Time
	events := -1
	switch k := r.rng.IntN(10); {
	case k < 2:
		mode, until = "recovering", time.Now().Add(time.Duration(r.rng.IntN(25))*time.Millisecond)
	case k < 6:
		mode, until = "delay", time.Now().Add(time.Duration(25+r.rng.IntN(300))*time.Millisecond)
	default:
		// Bounded in time too: the sessions may be waiting for decisions
		// or be nearly done.
		mode, until, events = "events", time.Now().Add(2*time.Second), 1+r.rng.IntN(12)
	}
	r.modes[mode]++
	base := int64(-1)
	for {
		total := r.poll()
		if base < 0 {
			base = total
		}
		if events > 0 && total-base >= int64(events) {
			return
		}
		if !time.Now().Before(until) || r.allDone() {
			return
		}
		time.Sleep(pollInterval)
	}
}

// settle lets the last incarnation run undisturbed until every session has
// finished, deciding in-doubt effects as they come.
func (r *crashRun) settle() {
	r.t.Helper()
	waitFor(r.t, crashSettleTimeout, "every session to finish after the last kill", func() (bool, error) {
		r.poll()
		return r.allDone(), nil
	})
}

// poll reads every session once, decides the pending in-doubt actions, and
// returns the sum of the sessions' last seqs (the test's progress measure).
// A session that failed or was cancelled fails the test at once.
func (r *crashRun) poll() int64 {
	r.t.Helper()
	l, err := r.srv.api.ListSessions(r.ctx, client.ListSessionsParams{Limit: client.MaxListLimit})
	require.NoError(r.t, err)
	require.Len(r.t, l.Data, len(r.sessions), "GET /v1/sessions lists every session")
	var total int64
	for _, s := range l.Data {
		cs := r.byID[s.ID]
		require.NotNil(r.t, cs, "unknown session %s", s.ID)
		total += s.LastEventSeq
		switch s.Status {
		case lt.SessionIdle:
			cs.done = true
		case lt.SessionFailed, lt.SessionCancelled:
			r.t.Fatalf("session %s (%s) is %s (stop reason %v); journal:\n%s",
				cs.label, s.ID, s.Status, deref(s.StopReason), describeJournal(journal(r.ctx, r.t, r.srv.api, s.ID)))
		case lt.SessionRequiresAction:
			r.decide(cs)
		}
	}
	return total
}

// decide settles every pending action of cs. Only in-doubt effects of
// irreversible shell calls may be pending: the decision comes from the
// counter file, never from the server. The line is there → the command
// ran (happened); it is not → it did not run (did_not_happen, and the server
// runs it again). The kill waited for the server to die, and the kernel
// killed its shells with it, so no late write can change the answer.
func (r *crashRun) decide(cs *crashSession) {
	r.t.Helper()
	l, err := r.srv.api.ListActions(r.ctx, cs.id, lt.ActionPending)
	require.NoError(r.t, err)
	for _, a := range l.Data {
		if a.Type == lt.ActionApproval {
			// A person approves exactly the arguments shown.
			require.True(r.t, cs.approval, "session %s: approval without a policy: %+v", cs.label, a)
			require.Equal(r.t, "shell", a.Tool, "session %s: approval of another tool: %+v", cs.label, a)
			require.Equal(r.t, "shell-review", a.Policy)
			got, err := r.srv.api.DecideAction(r.ctx, cs.id, a.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: a.ArgumentsSHA256})
			require.NoError(r.t, err, "approve action %s of session %s", a.ID, cs.label)
			require.Equal(r.t, lt.ActionResolved, got.Status)
			r.approvals++
			continue
		}
		require.Equal(r.t, lt.ActionInDoubt, a.Type, "session %s: unexpected pending action %+v", cs.label, a)
		require.Equal(r.t, "shell", a.Tool, "session %s: in-doubt action on a tool without an irreversible class: %+v", cs.label, a)
		require.True(r.t, cs.irreversible, "session %s: in-doubt action on an idempotent shell call: %+v", cs.label, a)
		var args struct {
			Command string `json:"command"`
		}
		require.NoError(r.t, json.Unmarshal(a.Arguments, &args))
		sc := r.byCommand[args.Command]
		require.NotNil(r.t, sc, "session %s: in-doubt action names a command not in the plan: %q", cs.label, args.Command)
		require.Same(r.t, cs, sc.session, "in-doubt action of session %s names a command of session %s", cs.label, sc.session.label)
		d := &lt.Decision{Decision: lt.DecisionDidNotHappen}
		if r.counterLines()[sc.mark] > 0 {
			d = &lt.Decision{Decision: lt.DecisionHappened, Output: json.RawMessage(
				`{"exit_code":0,"stdout":"","stderr":"","truncated":false,"timed_out":false}`)}
			r.happened++
		} else {
			r.didNotHappen++
		}
		got, err := r.srv.api.DecideAction(r.ctx, cs.id, a.ID, d)
		require.NoError(r.t, err, "decide in-doubt action %s of session %s", a.ID, cs.label)
		require.Equal(r.t, lt.ActionResolved, got.Status)
	}
}

func (r *crashRun) allDone() bool {
	for _, cs := range r.sessions {
		if !cs.done {
			return false
		}
	}
	return true
}

func (r *crashRun) killModes() string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(r.modes)) {
		parts = append(parts, fmt.Sprintf("%d %s", r.modes[m], m))
	}
	return strings.Join(parts, ", ")
}

// counterLines counts the lines of the irreversible counter file.
func (r *crashRun) counterLines() map[string]int {
	r.t.Helper()
	counts := map[string]int{}
	for _, line := range readLines(r.t, r.counterLog) {
		counts[line]++
	}
	return counts
}

// crashStats are counts the verification derives from the journals.
type crashStats struct {
	events             int
	irreversibleReruns int
	idempotentReruns   int
	readReruns         int
}

// verify checks the end state of every session against its plan and the
// outside world.
func (r *crashRun) verify() crashStats {
	r.t.Helper()
	var st crashStats

	// The world: one line per irreversible command, none twice; every
	// idempotent run recorded one key per (session, step).
	counter := r.counterLines()
	for line, n := range counter {
		require.Equal(r.t, 1, n, "irreversible command %q ran %d times", line, n)
	}
	keys := map[string][]string{} // mark -> keys seen by each run
	for _, line := range readLines(r.t, r.keysLog) {
		key, mark, ok := strings.Cut(line, " ")
		require.True(r.t, ok, "malformed key log line %q", line)
		keys[mark] = append(keys[mark], key)
	}
	planned := map[string]bool{}

	for _, cs := range r.sessions {
		sess, err := r.srv.api.GetSession(r.ctx, cs.id)
		require.NoError(r.t, err)
		require.Equal(r.t, lt.SessionIdle, sess.Status, "session %s", cs.label)
		require.Empty(r.t, sess.RequiredActions, "session %s", cs.label)
		evs := journal(r.ctx, r.t, r.srv.api, cs.id)
		requireGapFree(r.t, cs.id, evs)
		require.Equal(r.t, sess.LastEventSeq, int64(len(evs)), "session %s: last_event_seq vs journal length", cs.label)
		st.events += len(evs)
		calls := r.verifyJournal(cs, evs, &st)

		for _, ps := range cs.steps {
			for _, pc := range ps.calls {
				if pc.shell == nil {
					continue
				}
				sc := pc.shell
				planned[sc.mark] = true
				jc := calls.byCommand[sc.command]
				require.NotNil(r.t, jc, "session %s: shell call of step %d is not in the journal", cs.label, sc.step)
				if cs.irreversible {
					require.Equal(r.t, 1, counter[sc.mark], "irreversible command %q: lines in the counter file", sc.mark)
					continue
				}
				seen := keys[sc.mark]
				require.NotEmpty(r.t, seen, "idempotent command %q never ran", sc.mark)
				for _, k := range seen {
					require.Equal(r.t, jc.key, k, "idempotent command %q ran with a key other than the journal's", sc.mark)
				}
			}
		}
		r.verifyLedger(cs, calls)
	}
	for mark := range counter {
		require.True(r.t, planned[mark], "counter line %q belongs to no planned command", mark)
	}
	for mark := range keys {
		require.True(r.t, planned[mark], "key log line for %q belongs to no planned command", mark)
	}
	return st
}

// journalCall is what a session's journal says about one tool call.
type journalCall struct {
	callID        string
	tool          string
	class         lt.EffectClass
	command       string
	key           string // idempotency key of its tool.started events
	effectID      string
	started       int
	ended         int
	resolution    string
	actions       []string // its in-doubt actions
	didNotHappens int
	approvals     int // approval actions raised for it
	approved      bool
}

type journalCalls struct {
	byID      map[string]*journalCall
	byCommand map[string]*journalCall
}

// verifyJournal checks one journal against the plan: the turn completed
// with the final text, each planned call was requested in its step, ended
// exactly once, and started again only as the rules allow: an irreversible
// call once plus once per did_not_happen decision, others whenever a crash
// interrupted them but always with the same key.
func (r *crashRun) verifyJournal(cs *crashSession, evs []lt.Event, st *crashStats) journalCalls {
	r.t.Helper()
	calls := journalCalls{byID: map[string]*journalCall{}, byCommand: map[string]*journalCall{}}
	actionCall := map[string]*journalCall{}
	var order []*journalCall
	completed := 0
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventToolRequested:
			var d struct {
				CallID    string          `json:"call_id"`
				Tool      string          `json:"tool"`
				Kind      string          `json:"kind"`
				Class     lt.EffectClass  `json:"effect"`
				Arguments json.RawMessage `json:"arguments"`
			}
			decode(r.t, ev, &d)
			require.Nil(r.t, calls.byID[d.CallID], "session %s: call %s requested twice", cs.label, d.CallID)
			require.Equal(r.t, "builtin", d.Kind, "session %s: call %s (%s) was not accepted: %s", cs.label, d.CallID, d.Tool, ev.Data)
			c := &journalCall{callID: d.CallID, tool: d.Tool, class: d.Class}
			if d.Tool == "shell" {
				var args struct {
					Command string `json:"command"`
				}
				require.NoError(r.t, json.Unmarshal(d.Arguments, &args))
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
			decode(r.t, ev, &d)
			c := calls.byID[d.CallID]
			require.NotNil(r.t, c, "session %s: seq %d starts an unknown call", cs.label, ev.Seq)
			require.Zero(r.t, c.ended, "session %s: seq %d starts call %s after it ended", cs.label, ev.Seq, c.callID)
			require.NotEmpty(r.t, d.Key, "session %s: seq %d has no idempotency key", cs.label, ev.Seq)
			if c.started > 0 {
				require.Equal(r.t, c.key, d.Key, "session %s: call %s started again with another idempotency key", cs.label, c.callID)
				require.Equal(r.t, c.effectID, d.EffectID, "session %s: call %s started again with another effect id", cs.label, c.callID)
			}
			if cs.approval && c.tool == "shell" {
				require.True(r.t, c.approved, "session %s: call %s started (seq %d) before it was approved", cs.label, c.callID, ev.Seq)
			}
			if c.class == lt.EffectIrreversible {
				require.Equal(r.t, c.started, c.didNotHappens,
					"session %s: irreversible call %s started again (seq %d) without a did_not_happen decision", cs.label, c.callID, ev.Seq)
			}
			c.key, c.effectID = d.Key, d.EffectID
			c.started++
		case lt.EventToolCompleted, lt.EventToolFailed:
			var d struct {
				CallID     string `json:"call_id"`
				Error      string `json:"error"`
				Resolution string `json:"resolution"`
			}
			decode(r.t, ev, &d)
			c := calls.byID[d.CallID]
			require.NotNil(r.t, c, "session %s: seq %d ends an unknown call", cs.label, ev.Seq)
			require.Equal(r.t, lt.EventToolCompleted, ev.Type, "session %s: call %s (%s) failed: %s", cs.label, c.callID, c.tool, d.Error)
			c.ended++
			c.resolution = d.Resolution
		case lt.EventActionRequired:
			var d struct {
				Action lt.Action `json:"action"`
			}
			decode(r.t, ev, &d)
			c := calls.byID[d.Action.CallID]
			require.NotNil(r.t, c, "session %s: action %s names an unknown call", cs.label, d.Action.ID)
			actionCall[d.Action.ID] = c
			if d.Action.Type == lt.ActionApproval {
				require.True(r.t, cs.approval && c.tool == "shell", "session %s: unexpected approval %s", cs.label, d.Action.ID)
				require.Zero(r.t, c.started, "session %s: approval %s asked after call %s started", cs.label, d.Action.ID, c.callID)
				c.approvals++
				continue
			}
			require.Equal(r.t, lt.ActionInDoubt, d.Action.Type, "session %s: unexpected action %s", cs.label, d.Action.ID)
			require.Equal(r.t, lt.EffectIrreversible, c.class, "session %s: %s call %s went in doubt", cs.label, c.class, c.callID)
			c.actions = append(c.actions, d.Action.ID)
		case lt.EventActionResolved:
			var d struct {
				ActionID string      `json:"action_id"`
				Decision lt.Decision `json:"decision"`
			}
			decode(r.t, ev, &d)
			c := actionCall[d.ActionID]
			require.NotNil(r.t, c, "session %s: seq %d resolves an unknown action", cs.label, ev.Seq)
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
			decode(r.t, ev, &d)
			require.Equal(r.t, cs.final, d.Output, "session %s: turn output", cs.label)
			completed++
		}
	}
	require.Equal(r.t, 1, completed, "session %s: turn.completed events", cs.label)
	last := evs[len(evs)-1]
	require.Equal(r.t, lt.EventSessionStatusChanged, last.Type, "session %s: last event", cs.label)
	require.Contains(r.t, string(last.Data), `"to":"idle"`, "session %s: last event", cs.label)

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
		require.Equal(r.t, 1, c.ended, "session %s: call %s (%s) ended %d times", cs.label, c.callID, c.tool, c.ended)
		require.Positive(r.t, c.started, "session %s: call %s (%s) never started", cs.label, c.callID, c.tool)
		if cs.approval && c.tool == "shell" {
			require.Equal(r.t, 1, c.approvals, "session %s: call %s was asked about %d times (an approval is asked once)", cs.label, c.callID, c.approvals)
		}
		switch c.tool {
		case "shell":
			wantClass := lt.EffectIdempotent
			if cs.irreversible {
				wantClass = lt.EffectIrreversible
			}
			require.Equal(r.t, wantClass, c.class, "session %s: class of call %s", cs.label, c.callID)
		case "write_file":
			require.Equal(r.t, lt.EffectIdempotent, c.class, "session %s: class of call %s", cs.label, c.callID)
		default:
			require.Equal(r.t, lt.EffectRead, c.class, "session %s: class of call %s", cs.label, c.callID)
		}
		switch c.class {
		case lt.EffectIrreversible:
			require.Equal(r.t, 1+c.didNotHappens, c.started, "session %s: irreversible call %s starts", cs.label, c.callID)
			st.irreversibleReruns += c.started - 1
		case lt.EffectIdempotent:
			st.idempotentReruns += c.started - 1
		default:
			st.readReruns += c.started - 1
		}
	}
	require.Equal(r.t, want, got, "session %s: tool calls in the journal", cs.label)
	return calls
}

// verifyLedger checks the effect ledger: one row per call, none left
// started or in doubt, each with its call's key, and every irreversible one
// known to have happened (by running or by a decision).
func (r *crashRun) verifyLedger(cs *crashSession, calls journalCalls) {
	r.t.Helper()
	l, err := r.srv.api.ListEffects(r.ctx, cs.id)
	require.NoError(r.t, err)
	require.Nil(r.t, l.NextCursor, "session %s: the ledger fits one page", cs.label)
	require.Len(r.t, l.Data, len(calls.byID), "session %s: one ledger row per call", cs.label)
	for _, e := range l.Data {
		c := calls.byID[e.CallID]
		require.NotNil(r.t, c, "session %s: effect %s names an unknown call %s", cs.label, e.ID, e.CallID)
		require.Equal(r.t, c.effectID, e.ID, "session %s: effect id of call %s", cs.label, c.callID)
		require.Equal(r.t, c.key, e.IdempotencyKey, "session %s: key of effect %s", cs.label, e.ID)
		require.Equal(r.t, c.class, e.Class, "session %s: class of effect %s", cs.label, e.ID)
		require.NotEqual(r.t, lt.EffectStarted, e.Status, "session %s: effect %s is still started", cs.label, e.ID)
		require.NotEqual(r.t, lt.EffectInDoubt, e.Status, "session %s: effect %s is still in doubt", cs.label, e.ID)
		require.Equal(r.t, c.started, e.Attempts, "session %s: attempts of effect %s", cs.label, e.ID)
		if e.Class == lt.EffectIrreversible && c.resolution == lt.DecisionHappened {
			require.Equal(r.t, lt.EffectResolved, e.Status, "session %s: effect %s decided happened", cs.label, e.ID)
			require.Equal(r.t, lt.DecisionHappened, e.Resolution, "session %s: effect %s", cs.label, e.ID)
		} else {
			require.Equal(r.t, lt.EffectSucceeded, e.Status, "session %s: effect %s (%s)", cs.label, e.ID, e.Tool)
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
		fmt.Fprintf(&b, "%4d %-24s step=%d %s\n", ev.Seq, ev.Type, ev.Step, ev.Data)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
