package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A cancel interrupts the call in flight (interrupt.go, watchCancel): the
// clock never moves in these tests, so only the cancel can end the call.

func cancelNow(t *testing.T, h *harness, id string) *lt.Session {
	t.Helper()
	s, err := h.eng.CancelSession(context.Background(), id, &lt.CancelRequest{Reason: "stop now"})
	require.NoError(t, err)
	return s
}

func requireCancelled(t *testing.T, h *harness, id string) *lt.Session {
	t.Helper()
	s := h.waitStatus(id, lt.SessionCancelled)
	require.NotNil(t, s.StopReason)
	require.Equal(t, lt.StopCancelled, *s.StopReason)
	require.False(t, s.CancelRequested, "the cancel has taken effect")
	return s
}

// TestCancelInterruptsModelCall: a model call that would take ten minutes
// is abandoned at the cancel, counts what it was sent, and no tool call
// starts after it.
func TestCancelInterruptsModelCall(t *testing.T) {
	h := newHarness(t)
	s := create(t, h, spec(t, `[{"delay_ms":600000,"tool_calls":[{"name":"shell","arguments":{"command":"true"}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	require.True(t, cancelNow(t, h, s.ID).CancelRequested, "pending until it has taken effect")
	s = requireCancelled(t, h, s.ID)

	failed := events(t, h, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 1)
	d := data[lt.ModelFailedData](t, failed[0])
	require.Equal(t, "cancelled", d.Interrupted)
	require.Contains(t, d.Message, "the session was cancelled: stop now")
	require.NotNil(t, d.Usage)
	require.Positive(t, d.Usage.InputTokens)
	require.Equal(t, d.Usage.InputTokens, s.Usage.InputTokens, "the abandoned call's input is counted")
	require.Empty(t, events(t, h, s.ID, lt.EventModelResponded))
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
	checkJournal(t, h.store, s.ID)
}

// TestCancelKillsShell: a cancel kills a shell command's process group (a
// background child too) and no model call starts after it.
func TestCancelKillsShell(t *testing.T) {
	h := newHarness(t)
	cmd, bg := uniqueSleep(), uniqueSleep()
	args, err := json.Marshal(map[string]string{"command": "echo started; " + bg + " & " + cmd + "; echo never"})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)
	waitProcs(t, cmd, 1)
	waitProcs(t, bg, 1)
	cancelNow(t, h, s.ID)
	requireCancelled(t, h, s.ID)
	waitProcs(t, cmd, 0)
	waitProcs(t, bg, 0)

	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	d := data[lt.ToolFailedData](t, failed[0])
	require.Equal(t, "cancelled", d.Interrupted)
	require.Contains(t, string(d.Output), "started")
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1, "no model call after the cancel")
	checkJournal(t, h.store, s.ID)
}

// TestCancelEndsWaits: a session parked in sleep or wait_for_signal is
// cancelled at once; the waiting call never completes.
func TestCancelEndsWaits(t *testing.T) {
	for name, call := range map[string]string{
		"sleep":           `{"name":"sleep","arguments":{"seconds":3600}}`,
		"wait_for_signal": `{"name":"wait_for_signal","arguments":{"name":"never.comes"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			s := create(t, h, spec(t, `[{"tool_calls":[`+call+`]},{"text":"never"}]`, lt.ToolSpec{Name: "sleep"}, lt.ToolSpec{Name: "wait_for_signal"}), nil)
			h.waitStatus(s.ID, lt.SessionWaiting)
			cancelNow(t, h, s.ID)
			s = requireCancelled(t, h, s.ID)
			require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted))
			failed := events(t, h, s.ID, lt.EventToolFailed)
			require.Len(t, failed, 1, "the wait is cut, and says so")
			d := data[lt.ToolFailedData](t, failed[0])
			require.Equal(t, "interrupted: the session was cancelled: stop now", d.Error)
			require.Equal(t, "cancelled", d.Interrupted)
			require.Empty(t, d.Refused, "the wait had begun: cut, not refused")
			require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1)
			checkJournal(t, h.store, s.ID)
		})
	}
}

// TestCancelIrreversibleCallIsInDoubt: an irreversible command cut by a
// cancel may have taken effect: it becomes an in_doubt action, the cancel
// stays requested (and shown) until a person decides it, and the session
// is then cancelled without running the call again.
func TestCancelIrreversibleCallIsInDoubt(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := uniqueSleep()
	args, err := json.Marshal(map[string]string{"command": "echo x >> " + marker + "; " + cmd})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	waitFileHolds(t, marker, "x\n") // the echo done, not only its file created
	waitProcs(t, cmd, 1)
	cancelNow(t, h, s.ID)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	waitProcs(t, cmd, 0)
	require.True(t, s.CancelRequested, "held until the call is settled")
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Contains(t, act.Summary, "interrupted in flight: the session was cancelled: stop now")
	require.Len(t, events(t, h, s.ID, lt.EventEffectInDoubt), 1)

	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	requireCancelled(t, h, s.ID)
	lines, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "x\n", string(lines), "a cancelled session does not run the call again")
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 1)
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1)
	checkJournal(t, h.store, s.ID)
}

// TestCancelInterruptsMCPCall: an MCP call that never answers is cancelled
// with the session, per the protocol (the server is sent
// notifications/cancelled and logs it); the tool is idempotent, so the
// call simply failed.
func TestCancelInterruptsMCPCall(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"tool_calls":[{"name":"t__hang","arguments":{}}]},{"text":"never"}]`,
		testMCPServer(t, "t", func(s *lt.ToolSpec) { s.Effects = map[string]lt.EffectClass{"hang": lt.EffectIdempotent} }))
	sp.Policies = []lt.Policy{{Tool: "t__hang", Decision: lt.PolicyAllow}}
	s := create(t, h, sp, nil)
	waitEvent(t, h, s.ID, lt.EventToolStarted)
	cancelNow(t, h, s.ID)
	s = requireCancelled(t, h, s.ID)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "cancelled", data[lt.ToolFailedData](t, failed[0]).Interrupted)
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1)
	checkJournal(t, h.store, s.ID)
	calls := filepath.Join(h.workspace(s.ID), mcptest.CallLog)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(readLines(t, calls), func(l string) bool { return strings.HasPrefix(l, "hang ") && strings.HasSuffix(l, " cancelled") }) {
		require.True(t, time.Now().Before(deadline), "the server was never told the call was cancelled: %q", readLines(t, calls))
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// TestCancelAcrossACrash: a cancel requested while no worker runs the
// session (its worker died mid-call) is in the journal: the worker that
// resumes it honours it, first settling the irreversible call the dead
// worker had started (in doubt: the cancel waits for the decision), and
// runs nothing else.
func TestCancelAcrossACrash(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := uniqueSleep()
	args, err := json.Marshal(map[string]string{"command": "echo x >> " + marker + "; " + cmd})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	waitFileHolds(t, marker, "x\n") // the echo done, not only its file created
	waitProcs(t, cmd, 1)
	// Kill the engine hard: its runner is cancelled mid-call, like a
	// SIGKILL leaves it.
	hard, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, h.eng.Stop(hard))
	require.True(t, cancelNow(t, h, s.ID).CancelRequested)

	h.start("node-a") // the same node restarts: its old leases expire at once
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.True(t, s.CancelRequested, "held until the started call is settled")
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)

	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	requireCancelled(t, h, s.ID)
	lines, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "x\n", string(lines))
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 1)
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1)
	checkJournal(t, h.store, s.ID)
}

// cancellingTool is a read tool that cancels its own session through the
// API and then answers at once: the cancel lands between two calls.
type cancellingTool struct {
	eng   atomic.Pointer[func(ctx context.Context, sessionID string) error]
	calls atomic.Int32
}

func (c *cancellingTool) Name() string                { return "canceller" }
func (c *cancellingTool) Description() string         { return "Cancels its session." }
func (c *cancellingTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (c *cancellingTool) Effect() lt.EffectClass      { return lt.EffectRead }
func (c *cancellingTool) Run(ctx context.Context, call *tool.Call) (*tool.Result, error) {
	c.calls.Add(1)
	if err := (*c.eng.Load())(context.WithoutCancel(ctx), call.SessionID); err != nil {
		return nil, err
	}
	return &tool.Result{Output: "done"}, nil
}

// TestCancelBeforeTheNextCallStarts: a cancel that lands between two calls
// of a step is read in as the next call's start is made durable; that
// call (irreversible) is not run at all, so it failed rather than being in
// doubt, and the session is cancelled.
func TestCancelBeforeTheNextCallStarts(t *testing.T) {
	ct := &cancellingTool{}
	h := newHarness(t, ct)
	cancelFn := func(ctx context.Context, id string) error {
		_, err := h.eng.CancelSession(ctx, id, &lt.CancelRequest{Reason: "stop now"})
		return err
	}
	ct.eng.Store(&cancelFn)
	marker := filepath.Join(t.TempDir(), "ran")
	args, err := json.Marshal(map[string]string{"command": "echo x >> " + marker})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"canceller","arguments":{}},{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "canceller"}, lt.ToolSpec{Name: "shell"}), nil)
	s = requireCancelled(t, h, s.ID)
	require.Equal(t, int32(1), ct.calls.Load())
	require.NoFileExists(t, marker, "the call after the cancel must not run")
	require.Empty(t, s.RequiredActions)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	d := data[lt.ToolFailedData](t, failed[0])
	require.Equal(t, "shell", d.Tool)
	require.Equal(t, "cancelled", d.Interrupted)
	require.Equal(t, lt.RefusedTurnEnded, d.Refused)
	require.Contains(t, d.Error, "not run: the session was cancelled: stop now")
	require.Empty(t, events(t, h, s.ID, lt.EventEffectInDoubt))
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1)
	checkJournal(t, h.store, s.ID)
}

// TestCancelEndsARetryBackoff: a cancel ends the wait before a model call
// is tried again (an hour's Retry-After, whose timer never fires here), and
// no further attempt is made.
func TestCancelEndsARetryBackoff(t *testing.T) {
	h := newHarness(t)
	h.clock.mu.Lock()
	h.clock.holdHours = true // the harness's clock otherwise cuts waits to 20 ms
	h.clock.mu.Unlock()
	sp := spec(t, `[{"error":{"status":503,"retry_after_seconds":3600}},{"text":"never"}]`)
	sp.Retry = &lt.RetryPolicy{MaxAttempts: 4, InitialBackoffMS: 1000, MaxBackoffMS: 1500}
	s := create(t, h, sp, nil)
	waitEvent(t, h, s.ID, lt.EventModelFailed)
	cancelNow(t, h, s.ID)
	s = requireCancelled(t, h, s.ID)
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1, "no attempt after the cancel")
	require.Empty(t, events(t, h, s.ID, lt.EventModelResponded))
	checkJournal(t, h.store, s.ID)
}

// waitFileHolds polls until the file at path holds exactly want.
func waitFileHolds(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && string(b) == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s never held %q", path, want)
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

// TestCancelWhileWaitingForApproval: a cancel of a session parked on an
// approval voids it: the call never runs, a late approval is a conflict,
// and the session is cancelled with the cancel no longer pending.
func TestCancelWhileWaitingForApproval(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "ran")
	args, err := json.Marshal(map[string]string{"command": "echo x >> " + marker})
	require.NoError(t, err)
	sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`, lt.ToolSpec{Name: "shell"})
	sp.Policies = []lt.Policy{{Name: "commands", Tool: "shell", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionApproval, act.Type)

	cancelNow(t, h, s.ID)
	s = requireCancelled(t, h, s.ID)
	require.Empty(t, s.RequiredActions)
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: act.ArgumentsSHA256})
	requireAPIError(t, err, "conflict", "")
	acts, err := h.eng.ListActions(ctx, s.ID, "")
	require.NoError(t, err)
	require.Len(t, acts, 1)
	require.Equal(t, lt.ActionCancelled, acts[0].Status)
	require.NoFileExists(t, marker, "the call waiting for approval never ran")
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
	checkJournal(t, h.store, s.ID)
}

// deafStore is a store whose subscribers hear nothing while deaf is set:
// the node it serves stands for one whose notices of another node's writes
// are late (PostgreSQL's LISTEN delivers them after the commit, and a
// connection may be lost meanwhile).
type deafStore struct {
	store.Store
	deaf atomic.Bool
}

func (d *deafStore) Subscribe(ctx context.Context) (<-chan store.Notification, func()) {
	in, cancel := d.Store.Subscribe(ctx)
	out := make(chan store.Notification, cap(in))
	go func() {
		defer close(out)
		for n := range in {
			if !d.deaf.Load() {
				out <- n
			}
		}
	}()
	return out, cancel
}

// cancelAtAnswer is a model that, at its first call, has the session
// cancelled by another writer (cancel, with the session's id from ids) and
// then answers with a call of the read-only tool "reader"; it answers
// text after that.
type cancelAtAnswer struct {
	ids    chan string
	cancel func(id string)
	calls  atomic.Int32
}

func (m *cancelAtAnswer) Respond(context.Context, *model.Request) (*model.Response, error) {
	if m.calls.Add(1) > 1 {
		return &model.Response{Text: "never"}, nil
	}
	m.cancel(<-m.ids)
	return &model.Response{ToolCalls: []model.ToolCall{{ID: "call_1", Name: "reader", Arguments: json.RawMessage(`{}`)}}}, nil
}

// readerTool is a read-only tool that counts its runs.
type readerTool struct{ runs atomic.Int32 }

func (*readerTool) Name() string                { return "reader" }
func (*readerTool) Description() string         { return "Reads nothing, and counts." }
func (*readerTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (*readerTool) Effect() lt.EffectClass      { return lt.EffectRead }
func (r *readerTool) Run(context.Context, *tool.Call) (*tool.Result, error) {
	r.runs.Add(1)
	return &tool.Result{Output: "read"}, nil
}

// TestCancelFromAnotherNodeBeforeAReadCall: a cancel another node
// acknowledged while the model answered, whose notice this node has not
// heard, is read by the look before the step's calls (readControls): the
// read-only call the answer asked for never starts. A read-only call
// writes nothing before it runs, so the look is all that stands between
// an acknowledged cancel and its start; it used to act on a pause only,
// and the call ran, to be cut only once the notice came.
func TestCancelFromAnotherNodeBeforeAReadCall(t *testing.T) {
	reader := &readerTool{}
	var deaf *deafStore
	var h *harness
	m := &cancelAtAnswer{ids: make(chan string, 1)}
	m.cancel = func(id string) {
		deaf.deaf.Store(true)
		if _, err := h.eng.CancelSession(context.Background(), id, &lt.CancelRequest{Reason: "from node b"}); err != nil {
			t.Errorf("cancel: %v", err) // on the runner's goroutine: no FailNow
		}
	}
	h = newHarnessConfigured(t, m, func(h *harness) store.Store {
		h.clock.holdHours = true // before the engine starts: its first poll waits too
		deaf = &deafStore{Store: h.store}
		return deaf
	}, func(c *engine.Config) {
		c.Tools = append(tool.Builtins(), reader)
		c.PollInterval = time.Hour // no poll finds the cancel either
	})
	s := create(t, h, spec(t, `[{"text":"unused: the model is cancelAtAnswer"}]`, lt.ToolSpec{Name: "reader"}), nil)
	m.ids <- s.ID
	s = requireCancelled(t, h, s.ID)
	deaf.deaf.Store(false)
	require.Zero(t, reader.runs.Load(), "the read-only call started after the cancel")
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1, "no model call after the cancel")
	cancelled := events(t, h, s.ID, lt.EventSessionCancelRequested)
	require.Len(t, cancelled, 1)
	require.Equal(t, "from node b", data[lt.SessionCancelRequestedData](t, cancelled[0]).Reason)
	checkJournal(t, h.store, s.ID)
}

// TestCancelBeforeTheNextReadCallStarts: a cancel answered while a step's
// first call ran keeps its second from starting, though that one is
// read-only and writes nothing before it would run: the tick's look reads
// the cancel in (TestCancelBeforeTheNextCallStarts has an irreversible
// second call, whose durable start reads it).
func TestCancelBeforeTheNextReadCallStarts(t *testing.T) {
	ct, reader := &cancellingTool{}, &readerTool{}
	h := newHarness(t, ct, reader)
	cancelFn := func(ctx context.Context, id string) error {
		_, err := h.eng.CancelSession(ctx, id, &lt.CancelRequest{Reason: "stop now"})
		return err
	}
	ct.eng.Store(&cancelFn)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"canceller","arguments":{}},{"name":"reader","arguments":{}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "canceller"}, lt.ToolSpec{Name: "reader"}), nil)
	s = requireCancelled(t, h, s.ID)
	require.Equal(t, int32(1), ct.calls.Load())
	require.Zero(t, reader.runs.Load(), "the read-only call after the cancel must not run")
	started := events(t, h, s.ID, lt.EventToolStarted)
	require.Len(t, started, 1)
	require.Equal(t, "canceller", data[lt.ToolStartedData](t, started[0]).Tool)
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1)
	checkJournal(t, h.store, s.ID)
}

// TestCallsACancelLeftUnrunAreAnswered: the calls a cancel kept from
// running are journaled as failed, not run, so the context of a later turn
// answers every call the model asked for (providers refuse a context with a
// call left unanswered).
func TestCallsACancelLeftUnrunAreAnswered(t *testing.T) {
	ct, reader := &cancellingTool{}, &readerTool{}
	p := &planProvider{plan: []model.Response{
		{ToolCalls: []model.ToolCall{{ID: "call_a", Name: "canceller", Arguments: json.RawMessage(`{}`)}, {ID: "call_b", Name: "reader", Arguments: json.RawMessage(`{}`)}}},
		{Text: "after the cancel"},
	}}
	h := newHarnessConfigured(t, p, func(h *harness) store.Store { return h.store }, func(c *engine.Config) {
		c.Tools = append(tool.Builtins(), ct, reader)
	})
	cancelFn := func(ctx context.Context, id string) error {
		_, err := h.eng.CancelSession(ctx, id, &lt.CancelRequest{Reason: "stop now"})
		return err
	}
	ct.eng.Store(&cancelFn)
	s := create(t, h, spec(t, `[{"text":"unused: the model is planProvider"}]`, lt.ToolSpec{Name: "canceller"}, lt.ToolSpec{Name: "reader"}), nil)
	requireCancelled(t, h, s.ID)
	require.Zero(t, reader.runs.Load())
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1, "the call the cancel kept from running")
	d := data[lt.ToolFailedData](t, failed[0])
	require.Equal(t, "call_b", d.CallID)
	require.Equal(t, "cancelled", d.Interrupted)
	require.Equal(t, "not run: the session was cancelled: stop now", d.Error)

	_, err := h.eng.CreateTurn(context.Background(), s.ID, &lt.CreateTurnRequest{Input: "go on"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	p.mu.Lock()
	last := p.requests[len(p.requests)-1].msgs
	p.mu.Unlock()
	answered := map[string]bool{}
	for _, m := range last {
		if m.Role == model.RoleTool {
			answered[m.CallID] = true
		}
	}
	for _, m := range last {
		for _, c := range m.ToolCalls {
			require.True(t, answered[c.ID], "call %s (%s) is not answered in the next turn's context", c.ID, c.Name)
		}
	}
	checkJournal(t, h.store, s.ID)
}
