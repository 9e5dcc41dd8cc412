package engine_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// events returns a session's journal events of the given types (all when
// none is given).
func events(t *testing.T, h *harness, id string, types ...string) []lt.Event {
	t.Helper()
	evs, err := h.store.EventList(context.Background(), id, 0, 10000)
	require.NoError(t, err)
	var out []lt.Event
	for _, ev := range evs {
		if len(types) == 0 || containsString(types, ev.Type) {
			out = append(out, lt.Event{Seq: ev.Seq, Type: ev.Type, Time: ev.Time, SessionID: ev.SessionID, TurnID: ev.TurnID, Step: ev.Step, Data: ev.Data})
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func data[T any](t *testing.T, ev lt.Event) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(ev.Data, &v), "event %d %s", ev.Seq, ev.Type)
	return v
}

func create(t *testing.T, h *harness, sp *lt.AgentSpec, budget *lt.Budget) *lt.Session {
	t.Helper()
	req := &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"}
	if budget != nil {
		req.Budget = budget
	}
	s, err := h.eng.CreateSession(context.Background(), req)
	require.NoError(t, err)
	return s
}

func requireAPIError(t *testing.T, err error, code, contains string) {
	t.Helper()
	require.Error(t, err)
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, code, ae.Code, "%v", err)
	require.Contains(t, err.Error(), contains)
}

// TestApprovalBindingRefusesOtherArguments: a person approves arguments A;
// if anything makes the call about to run carry arguments B (here the
// stored projection is tampered with while no worker runs), execution
// refuses it, journals why, and the effect never happens.
func TestApprovalBindingRefusesOtherArguments(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"approved"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "write_file"})
	sp.Policies = []lt.Policy{{Name: "writes", Tool: "write_file", Decision: lt.PolicyAsk, Reason: "writes need a look"}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionApproval, act.Type)
	require.Equal(t, "writes", act.Policy)
	sum, err := tool.ArgumentsSHA256(act.Arguments)
	require.NoError(t, err)
	require.Equal(t, sum, act.ArgumentsSHA256)

	// Stop the worker, approve A, then swap the arguments for B behind the
	// engine's back.
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: act.ArgumentsSHA256})
	require.NoError(t, err)
	db, err := sql.Open("sqlite", filepath.Join(h.dir, "longhaul.db"))
	require.NoError(t, err)
	defer db.Close()
	var raw string
	require.NoError(t, db.QueryRow(`SELECT state FROM sessions WHERE id = ?`, s.ID).Scan(&raw))
	var st journal.State
	require.NoError(t, json.Unmarshal([]byte(raw), &st))
	require.NotEmpty(t, st.Step.Calls[0].ApprovedSHA256)
	st.Step.Calls[0].Arguments = json.RawMessage(`{"content":"forged","path":"a.txt"}`)
	forged, err := json.Marshal(&st)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE sessions SET state = ? WHERE id = ?`, string(forged), s.ID)
	require.NoError(t, err)

	h.start("node-a")
	h.waitStatus(s.ID, lt.SessionIdle)
	_, err = os.Stat(filepath.Join(h.dir, "workspaces", s.ID, "a.txt"))
	require.True(t, os.IsNotExist(err), "the forged call must not run")
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	d := data[lt.ToolFailedData](t, failed[0])
	require.Equal(t, lt.RefusedApprovalMismatch, d.Refused)
	require.Contains(t, d.Error, "not the ones a person approved")
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
}

// TestApprovalExpiry: an approval nobody decides in time rejects the call
// by itself (the session wakes at the expiry, holding no worker meanwhile),
// and a late decision is refused.
func TestApprovalExpiry(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"x"}}]},{"text":"gave up"}]`,
		lt.ToolSpec{Name: "write_file"})
	sp.Policies = []lt.Policy{{Tool: "write_file", Decision: lt.PolicyAsk, ExpiresInSeconds: 60}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	require.NotNil(t, act.ExpiresAt)
	require.Equal(t, h.clock.Now().Add(time.Minute), *act.ExpiresAt)
	require.Equal(t, "policies[0]", act.Policy)

	h.clock.Advance(61 * time.Second)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "gave up", mustTurnOutput(t, h, s))
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Equal(t, lt.RefusedApprovalExpired, data[lt.ToolFailedData](t, failed[0]).Refused)

	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	requireAPIError(t, err, lt.CodeConflict, "expired")
	checkJournal(t, h.store, s.ID)
}

// TestLateDecisionOnExpiredApproval: a decision that arrives after the
// expiry, before any worker noticed, is refused and rejects the call.
func TestLateDecisionOnExpiredApproval(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"x"}}]},{"text":"ok"}]`,
		lt.ToolSpec{Name: "write_file"})
	sp.Policies = []lt.Policy{{Tool: "write_file", Decision: lt.PolicyAsk, ExpiresInSeconds: 30}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()
	h.clock.Advance(31 * time.Second)
	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionApprove})
	requireAPIError(t, err, lt.CodeConflict, "expired")
	h.start("node-a")
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
	checkJournal(t, h.store, s.ID)
}

func mustTurnOutput(t *testing.T, h *harness, s *lt.Session) string {
	t.Helper()
	turns, err := h.eng.ListTurns(context.Background(), s.ID)
	require.NoError(t, err)
	return turns[len(turns)-1].Output
}

// TestModelRetryBackoff: transient model errors are retried with
// exponential backoff and jitter, a longer Retry-After wins, and every
// attempt is journaled with its wait.
func TestModelRetryBackoff(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"error":{"status":500}},{"error":{"status":503}},{"error":{"status":429,"retry_after_seconds":10}},{"text":"ok"}]`)
	sp.Retry = &lt.RetryPolicy{MaxAttempts: 4, InitialBackoffMS: 1000, MaxBackoffMS: 1500}
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	failed := events(t, h, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 3)
	var waits []int64
	for i, ev := range failed {
		d := data[lt.ModelFailedData](t, ev)
		require.Equal(t, i+1, d.Attempt)
		require.True(t, d.Retry)
		waits = append(waits, d.RetryInMS)
	}
	require.GreaterOrEqual(t, waits[0], int64(500)) // equal jitter on 1 s
	require.LessOrEqual(t, waits[0], int64(1000))
	require.GreaterOrEqual(t, waits[1], int64(750)) // 2 s capped at 1.5 s
	require.LessOrEqual(t, waits[1], int64(1500))
	require.Equal(t, int64(10000), waits[2]) // Retry-After is longer
}

// flakyTool fails transiently until it has been called failures times,
// asking to be called again after retryAfter when it is set.
type flakyTool struct {
	name       string
	class      lt.EffectClass
	failures   int32
	retryAfter time.Duration
	calls      atomic.Int32
	keys       chan string
}

func (f *flakyTool) Name() string                { return f.name }
func (f *flakyTool) Description() string         { return "A remote service that is sometimes down." }
func (f *flakyTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (f *flakyTool) Effect() lt.EffectClass      { return f.class }
func (f *flakyTool) Run(_ context.Context, c *tool.Call) (*tool.Result, error) {
	n := f.calls.Add(1)
	f.keys <- c.IdempotencyKey
	if n <= f.failures {
		return &tool.Result{Error: fmt.Sprintf("503 from upstream (call %d)", n), Transient: true, RetryAfter: f.retryAfter}, nil
	}
	return &tool.Result{Output: "ok"}, nil
}

func TestToolRetriesFollowTheEffectClass(t *testing.T) {
	script := `[{"tool_calls":[{"name":"remote","arguments":{}}]},{"text":"finished"}]`
	t.Run("idempotent: retried with the same key until it works", func(t *testing.T) {
		ft := &flakyTool{name: "remote", class: lt.EffectIdempotent, failures: 2, keys: make(chan string, 10)}
		h := newHarness(t, ft)
		s := create(t, h, spec(t, script, lt.ToolSpec{Name: "remote"}), nil)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		require.Equal(t, int32(3), ft.calls.Load())
		k1, k2, k3 := <-ft.keys, <-ft.keys, <-ft.keys
		require.Equal(t, k1, k2)
		require.Equal(t, k1, k3)
		started := events(t, h, s.ID, lt.EventToolStarted)
		require.Len(t, started, 3)
		for i, ev := range started {
			require.Equal(t, i+1, data[lt.ToolStartedData](t, ev).Attempt)
		}
		failed := events(t, h, s.ID, lt.EventToolFailed)
		require.Len(t, failed, 2)
		for _, ev := range failed {
			d := data[lt.ToolFailedData](t, ev)
			require.True(t, d.Retry)
			require.Positive(t, d.RetryInMS)
		}
		effects, err := h.eng.ListEffects(context.Background(), s.ID)
		require.NoError(t, err)
		require.Len(t, effects, 1)
		require.Equal(t, lt.EffectSucceeded, effects[0].Status)
		require.Equal(t, 3, effects[0].Attempts)
		checkJournal(t, h.store, s.ID)
	})
	t.Run("irreversible: never retried by itself", func(t *testing.T) {
		ft := &flakyTool{name: "remote", class: lt.EffectIrreversible, failures: 1, keys: make(chan string, 10)}
		h := newHarness(t, ft)
		s := create(t, h, spec(t, script, lt.ToolSpec{Name: "remote"}), nil)
		h.waitStatus(s.ID, lt.SessionIdle)
		require.Equal(t, int32(1), ft.calls.Load())
		failed := events(t, h, s.ID, lt.EventToolFailed)
		require.Len(t, failed, 1)
		require.False(t, data[lt.ToolFailedData](t, failed[0]).Retry)
	})
	t.Run("exhausted: the turn stops", func(t *testing.T) {
		ft := &flakyTool{name: "remote", class: lt.EffectRead, failures: 100, keys: make(chan string, 10)}
		h := newHarness(t, ft)
		sp := spec(t, script, lt.ToolSpec{Name: "remote"})
		sp.Retry = &lt.RetryPolicy{MaxAttempts: 3, InitialBackoffMS: 10}
		s := create(t, h, sp, nil)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopRetriesExhausted, *s.StopReason)
		require.Equal(t, int32(3), ft.calls.Load())
		checkJournal(t, h.store, s.ID)
	})
}

// alwaysContinue is a script that never ends the turn by itself: every step
// asks for a tool and reports the same usage.
func alwaysContinue(steps int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range steps {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"tool_calls":[{"name":"list_files","arguments":{"path":"d%d"}}],"usage":{"input_tokens":1000,"output_tokens":100}}`, i)
	}
	b.WriteString("]")
	return b.String()
}

// TestHardBudgetOverspendIsAtMostOneStep: against a model that never stops,
// every hard limit stops the turn with budget_exceeded, and usage passes the
// limit by at most what one step consumes.
func TestHardBudgetOverspendIsAtMostOneStep(t *testing.T) {
	// One step: 1,100 tokens, $0.0021 (1,000 in at $1/M + 100 out at $10/M
	// = $0.002), one model call and one tool call.
	for name, tc := range map[string]struct {
		budget lt.Budget
		check  func(t *testing.T, u lt.Usage)
	}{
		"cost": {lt.Budget{MaxCostUSD: 0.05}, func(t *testing.T, u lt.Usage) {
			require.GreaterOrEqual(t, u.CostUSD, 0.05)
			require.LessOrEqual(t, u.CostUSD, 0.05+0.002+1e-9)
		}},
		"tokens": {lt.Budget{MaxTokens: 20000}, func(t *testing.T, u lt.Usage) {
			used := u.InputTokens + u.OutputTokens
			require.GreaterOrEqual(t, used, int64(20000))
			require.LessOrEqual(t, used, int64(20000+1100))
		}},
		"model calls": {lt.Budget{MaxModelCalls: 17}, func(t *testing.T, u lt.Usage) {
			require.Equal(t, int64(17), u.ModelCalls)
		}},
		"tool calls": {lt.Budget{MaxToolCalls: 13}, func(t *testing.T, u lt.Usage) {
			require.Equal(t, int64(13), u.ToolCalls)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			sp := spec(t, alwaysContinue(300), lt.ToolSpec{Name: "list_files"})
			sp.Model.Pricing = json.RawMessage(`{"input_per_mtok":1,"output_per_mtok":10}`)
			sp.MaxConsecutiveToolErrors = 1000 // the listed directories do not exist
			sp.MaxSteps = 1000
			s := create(t, h, sp, &tc.budget)
			s = h.waitStatus(s.ID, lt.SessionFailed)
			require.Equal(t, lt.StopBudgetExceeded, *s.StopReason)
			tc.check(t, s.Usage)
			require.Len(t, events(t, h, s.ID, lt.EventBudgetExceeded), 1)
			require.Len(t, events(t, h, s.ID, lt.EventBudgetWarning), 1, "one warning at 80 %%")
			checkJournal(t, h.store, s.ID)
		})
	}
	t.Run("wall clock", func(t *testing.T) {
		h := newHarness(t)
		sp := spec(t, `[{"tool_calls":[{"name":"lookup","arguments":{}}]},{"tool_calls":[{"name":"lookup","arguments":{"n":2}}]},{"text":"never"}]`,
			lt.ToolSpec{Name: "lookup", Type: "function"})
		s := create(t, h, sp, &lt.Budget{MaxWallSeconds: 3600})
		s = h.waitStatus(s.ID, lt.SessionRequiresAction)
		h.clock.Advance(2 * time.Hour)
		_, err := h.eng.DecideAction(context.Background(), s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopBudgetExceeded, *s.StopReason)
		require.Equal(t, int64(1), s.Usage.ModelCalls, "no model call after the limit")
	})
}

// TestSoftBudget: a soft threshold pauses the session with a budget action;
// approving lets it go on to the hard limit, a budget PATCH that lifts the
// threshold resolves the action, and stop ends the turn.
func TestSoftBudget(t *testing.T) {
	ctx := context.Background()
	newSession := func(t *testing.T, h *harness) *lt.Session {
		sp := spec(t, alwaysContinue(50), lt.ToolSpec{Name: "list_files"})
		sp.MaxConsecutiveToolErrors = 1000
		return create(t, h, sp, &lt.Budget{SoftModelCalls: 3, MaxModelCalls: 10})
	}
	t.Run("approve", func(t *testing.T) {
		h := newHarness(t)
		s := newSession(t, h)
		s = h.waitStatus(s.ID, lt.SessionRequiresAction)
		require.Len(t, s.RequiredActions, 1)
		act := s.RequiredActions[0]
		require.Equal(t, lt.ActionBudget, act.Type)
		require.Equal(t, &lt.BudgetLimit{Name: "model_calls", Soft: 3, Max: 10, Used: 3}, act.Limit)
		require.Equal(t, int64(3), act.Usage.ModelCalls)
		require.Contains(t, act.Summary, "soft limit on model calls")
		// Lowering the soft limit below usage is refused naming the field.
		_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, Budget: &lt.Budget{SoftModelCalls: 20}})
		requireAPIError(t, err, lt.CodeInvalidRequest, "budget.soft_model_calls")
		_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopBudgetExceeded, *s.StopReason)
		require.Equal(t, int64(10), s.Usage.ModelCalls)
		require.Zero(t, s.Budget.SoftModelCalls, "approving lifted the threshold")
		checkJournal(t, h.store, s.ID)
	})
	t.Run("stop", func(t *testing.T) {
		h := newHarness(t)
		s := newSession(t, h)
		s = h.waitStatus(s.ID, lt.SessionRequiresAction)
		_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionStop, Reason: "enough"})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopBudgetExceeded, *s.StopReason)
		require.Equal(t, int64(3), s.Usage.ModelCalls)
	})
	t.Run("patch", func(t *testing.T) {
		h := newHarness(t)
		s := newSession(t, h)
		s = h.waitStatus(s.ID, lt.SessionRequiresAction)
		five := int64(5)
		s, err := h.eng.UpdateBudget(ctx, s.ID, &lt.BudgetPatch{SoftModelCalls: &five})
		require.NoError(t, err)
		require.Empty(t, s.RequiredActions, "the new threshold is above the usage")
		s = h.waitStatus(s.ID, lt.SessionRequiresAction)
		require.Equal(t, 5.0, s.RequiredActions[0].Limit.Used)
		// A bad patch names the field and changes nothing.
		bad := int64(50)
		_, err = h.eng.UpdateBudget(ctx, s.ID, &lt.BudgetPatch{SoftModelCalls: &bad})
		requireAPIError(t, err, lt.CodeInvalidRequest, "soft_model_calls")
		zero := int64(0)
		_, err = h.eng.UpdateBudget(ctx, s.ID, &lt.BudgetPatch{SoftModelCalls: &zero})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopBudgetExceeded, *s.StopReason)

		// Stopped by its budget, the session continues with a new turn
		// once the budget allows.
		twenty := int64(12)
		_, err = h.eng.UpdateBudget(ctx, s.ID, &lt.BudgetPatch{MaxModelCalls: &twenty})
		require.NoError(t, err)
		_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "go on"})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, int64(12), s.Usage.ModelCalls)
		require.Len(t, events(t, h, s.ID, lt.EventBudgetUpdated), 3)
		checkJournal(t, h.store, s.ID)
	})
}

// TestStopConditions: each stop condition ends the turn with its own
// stop_reason.
func TestStopConditions(t *testing.T) {
	t.Run("loop detection refuses the repeated call", func(t *testing.T) {
		h := newHarness(t)
		call := `{"tool_calls":[{"name":"list_files","arguments":{"path":"."}}]}`
		sp := spec(t, "["+strings.Repeat(call+",", 5)+`{"text":"never"}]`, lt.ToolSpec{Name: "list_files"})
		sp.MaxRepeatedCalls = 3
		s := create(t, h, sp, nil)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopLoopDetected, *s.StopReason)
		require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 2, "the third identical call never ran")
		failed := events(t, h, s.ID, lt.EventToolFailed)
		require.Equal(t, lt.RefusedLoop, data[lt.ToolFailedData](t, failed[len(failed)-1]).Refused)
	})
	t.Run("consecutive tool errors", func(t *testing.T) {
		h := newHarness(t)
		sp := spec(t, alwaysContinue(20), lt.ToolSpec{Name: "list_files"})
		sp.MaxConsecutiveToolErrors = 4
		s := create(t, h, sp, nil)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopToolErrors, *s.StopReason)
		require.Equal(t, int64(4), s.Usage.ModelCalls)
	})
	t.Run("max steps", func(t *testing.T) {
		h := newHarness(t)
		sp := spec(t, alwaysContinue(20), lt.ToolSpec{Name: "list_files"})
		sp.MaxSteps = 3
		sp.MaxConsecutiveToolErrors = 100
		s := create(t, h, sp, nil)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopMaxSteps, *s.StopReason)
		require.Equal(t, int64(3), s.Usage.ModelCalls)
	})
	t.Run("turn timeout", func(t *testing.T) {
		h := newHarness(t)
		sp := spec(t, `[{"tool_calls":[{"name":"lookup","arguments":{}}]},{"text":"too late"}]`, lt.ToolSpec{Name: "lookup", Type: "function"})
		sp.TurnTimeoutSeconds = 60
		s := create(t, h, sp, nil)
		s = h.waitStatus(s.ID, lt.SessionRequiresAction)
		h.clock.Advance(61 * time.Second)
		_, err := h.eng.DecideAction(context.Background(), s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"x"`)})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopTimeout, *s.StopReason)
		require.Equal(t, int64(1), s.Usage.ModelCalls)
	})
}

// TestTrajectoryRules: policies over the session's past effects: a count
// rule denies the third e-mail, a sum rule asks past $100, and an order
// rule asks before deploying after a failed test run.
func TestTrajectoryRules(t *testing.T) {
	ctx := context.Background()
	fn := func(name string) lt.ToolSpec {
		return lt.ToolSpec{Name: name, Type: "function", Effect: lt.EffectIrreversible}
	}
	// answerAll answers every function call with output (or error for the
	// named tool) until the session is not waiting on one.
	answerAll := func(t *testing.T, h *harness, id, failTool string) *lt.Session {
		for {
			s := h.waitStatus(id, lt.SessionRequiresAction, lt.SessionIdle, lt.SessionFailed)
			if s.Status != lt.SessionRequiresAction || s.RequiredActions[0].Type != lt.ActionFunctionCall {
				return s
			}
			a := s.RequiredActions[0]
			d := &lt.Decision{Output: json.RawMessage(`"ok"`)}
			if a.Tool == failTool {
				d = &lt.Decision{Error: "2 tests failed"}
			}
			_, err := h.eng.DecideAction(ctx, id, a.ID, d)
			require.NoError(t, err)
		}
	}
	t.Run("count", func(t *testing.T) {
		h := newHarness(t)
		sp := spec(t, `[
		  {"tool_calls":[{"name":"send_email","arguments":{"to":"a@x.com"}}]},
		  {"tool_calls":[{"name":"send_email","arguments":{"to":"b@x.com"}}]},
		  {"tool_calls":[{"name":"send_email","arguments":{"to":"c@x.com"}}]},
		  {"text":"done"}]`, fn("send_email"))
		sp.Policies = []lt.Policy{{Name: "two-emails", Tool: "send_email", When: `count(effects, e.tool == "send_email") >= 2`, Decision: lt.PolicyDeny, Reason: "at most two e-mails per session"}}
		s := create(t, h, sp, nil)
		s = answerAll(t, h, s.ID, "")
		require.Equal(t, lt.SessionIdle, s.Status)
		decided := events(t, h, s.ID, lt.EventPolicyDecided)
		require.Len(t, decided, 1)
		pd := data[lt.PolicyDecidedData](t, decided[0])
		require.Equal(t, "two-emails", pd.Rule)
		require.Equal(t, lt.PolicyDeny, pd.Decision)
		failed := events(t, h, s.ID, lt.EventToolFailed)
		require.Len(t, failed, 1)
		fd := data[lt.ToolFailedData](t, failed[0])
		require.Equal(t, lt.RefusedPolicy, fd.Refused)
		require.Contains(t, fd.Error, "at most two e-mails per session")
		require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 2)
	})
	t.Run("sum", func(t *testing.T) {
		h := newHarness(t)
		sp := spec(t, `[
		  {"tool_calls":[{"name":"pay","arguments":{"amount_usd":60}}]},
		  {"tool_calls":[{"name":"pay","arguments":{"amount_usd":30.5}}]},
		  {"tool_calls":[{"name":"pay","arguments":{"amount_usd":10}}]},
		  {"text":"done"}]`, fn("pay"))
		sp.Policies = []lt.Policy{{Name: "spend", Tool: "pay", When: `sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100`, Decision: lt.PolicyAsk}}
		s := create(t, h, sp, nil)
		s = answerAll(t, h, s.ID, "")
		require.Equal(t, lt.SessionRequiresAction, s.Status)
		a := s.RequiredActions[0]
		require.Equal(t, lt.ActionApproval, a.Type)
		require.JSONEq(t, `{"amount_usd":10}`, string(a.Arguments))
		require.Equal(t, "spend", a.Policy)
	})
	t.Run("order", func(t *testing.T) {
		h := newHarness(t)
		sp := spec(t, `[
		  {"tool_calls":[{"name":"deploy","arguments":{"env":"staging"}}]},
		  {"tool_calls":[{"name":"run_tests","arguments":{}}]},
		  {"tool_calls":[{"name":"deploy","arguments":{"env":"prod"}}]},
		  {"text":"done"}]`, fn("deploy"), fn("run_tests"))
		sp.Policies = []lt.Policy{{Name: "tests-first", Tool: "deploy", When: `last(effects, e.tool == "run_tests").status == "failed"`, Decision: lt.PolicyAsk, Reason: "the last test run failed"}}
		s := create(t, h, sp, nil)
		s = answerAll(t, h, s.ID, "run_tests")
		require.Equal(t, lt.SessionRequiresAction, s.Status)
		a := s.RequiredActions[0]
		require.Equal(t, lt.ActionApproval, a.Type)
		require.JSONEq(t, `{"env":"prod"}`, string(a.Arguments), "staging deployed freely before any test ran")
		require.Contains(t, strings.Join(a.Evidence, "\n"), "the last test run failed")
		require.Equal(t, "Your application performs deploy once approved: Longhaul cannot see or limit what it does; it is irreversible: it cannot be undone, and may not be repeated safely", a.Consequence)
		checkJournal(t, h.store, s.ID)
	})
}

// TestSessionNoRunnerCanBeMadeOfEndsItsTurn: a session whose stored agent
// spec the engine refuses (a policy named like a default, written behind
// the API's back) fails its turn as an internal error once. Before, the
// turn could not be ended without a runner, and the released session was
// claimed and failed again at once, for ever.
func TestSessionNoRunnerCanBeMadeOfEndsItsTurn(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"ask_human","arguments":{"question":"which colour?"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "ask_human"})
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)

	refuseStoredSpec(t, h, s.ID)

	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Answer: "blue"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopInternal, *s.StopReason)
	failed := events(t, h, s.ID, lt.EventTurnFailed)
	require.Len(t, failed, 1)
	require.Contains(t, data[lt.TurnFailedData](t, failed[0]).Error, "looks like a default name")
	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.False(t, row.Runnable, "not claimed again")
	checkJournal(t, h.store, s.ID)
}

// refuseStoredSpec makes the engine refuse session id's stored agent spec
// (a policy named like a default, written behind the API's back): no
// runner can be made of it.
func refuseStoredSpec(t *testing.T, h *harness, id string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(h.dir, "longhaul.db"))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`UPDATE sessions SET spec = json_set(coalesce(spec, (SELECT p.spec FROM session_specs p WHERE p.id = sessions.id)), '$.policies', json('[{"name":"policies[0]","decision":"allow"}]')) WHERE id = ?`, id)
	require.NoError(t, err)
}

// askingChild is a sub-agent that asks a person a question, then answers.
func askingChild(t *testing.T) map[string]any {
	t.Helper()
	return childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("ask_human", map[string]any{"question": "which colour?"})}},
		map[string]any{"text": "kid done"},
	), "ask_human")
}

// TestSubagentNoRunnerCanBeMadeOfReportsToItsParent: a sub-agent no
// runner can be made of has its turn ended and tells its parent, without
// a runner, which goes on; it is not claimed again.
func TestSubagentNoRunnerCanBeMadeOfReportsToItsParent(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	kid := askingChild(t)
	root := create(t, h, spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": kid, "input": "do it"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "root done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "ask_human"}), nil)
	h.waitStatus(root.ID, lt.SessionWaiting)
	kids := children(t, h, root.ID)
	require.Len(t, kids, 1)
	c := h.waitStatus(kids[0].ID, lt.SessionRequiresAction)
	refuseStoredSpec(t, h, c.ID)

	_, err := h.eng.DecideAction(ctx, c.ID, c.RequiredActions[0].ID, &lt.Decision{Answer: "blue"})
	require.NoError(t, err)
	r := h.waitStatus(root.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, r.Status, "the parent heard of its sub-agent and went on")
	c = session(t, h, c.ID)
	require.Equal(t, lt.SessionFailed, c.Status)
	require.Equal(t, lt.StopInternal, *c.StopReason)
	require.Len(t, events(t, h, c.ID, lt.EventSubagentReported), 1)
	row, err := h.store.SessionGet(ctx, c.ID)
	require.NoError(t, err)
	require.False(t, row.Runnable, "not claimed again")
}

// TestRootNoRunnerCanBeMadeOfStopsItsSubagents: a root no runner can be
// made of has its turn ended without one, and the sub-agent of that turn
// is asked to stop, as a runner would have: the root is not claimed again.
func TestRootNoRunnerCanBeMadeOfStopsItsSubagents(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	kid := askingChild(t)
	root := create(t, h, spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": kid, "input": "do it"})}},
		map[string]any{"tool_calls": []any{toolCall("ask_human", map[string]any{"question": "go on?"})}},
		map[string]any{"text": "root done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "ask_human"}), nil)
	r := h.waitStatus(root.ID, lt.SessionRequiresAction)
	kids := children(t, h, root.ID)
	require.Len(t, kids, 1)
	h.waitStatus(kids[0].ID, lt.SessionRequiresAction)
	refuseStoredSpec(t, h, root.ID)

	_, err := h.eng.DecideAction(ctx, root.ID, r.RequiredActions[0].ID, &lt.Decision{Answer: "yes"})
	require.NoError(t, err)
	h.waitStatus(kids[0].ID, lt.SessionCancelled)
	// The request is journaled in the root after the child is asked (a
	// child waiting on a person is cancelled at once): read once the
	// root's turn is over.
	r = h.waitStatus(root.ID, lt.SessionFailed)
	require.Len(t, events(t, h, root.ID, lt.EventSubagentCancelRequested), 1)
	require.Equal(t, lt.StopInternal, *r.StopReason)
	waitUntil(t, 10*time.Second, func() bool {
		row, err := h.store.SessionGet(ctx, root.ID)
		require.NoError(t, err)
		return !row.Runnable
	})
}
