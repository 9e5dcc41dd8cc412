package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A turn can end before the calls its last step asked for have run (a
// cancel, a budget, a timeout, an approval never given). A later turn's
// context must still answer every call the model asked for: Anthropic's
// and OpenAI's APIs refuse a conversation with a tool call that no result
// follows, so the turn a person starts after raising a budget would fail.

// requireEveryCallAnswered fails unless each tool call of msgs is followed
// by a result for it.
func requireEveryCallAnswered(t *testing.T, msgs []model.Message) {
	t.Helper()
	for i, m := range msgs {
		for _, c := range m.ToolCalls {
			answered := false
			for _, r := range msgs[i+1:] {
				if r.Role == model.RoleTool && r.CallID == c.ID {
					answered = true
					break
				}
			}
			require.True(t, answered, "call %s (%s) has no result in the context", c.ID, c.Name)
		}
	}
}

// lastStepRequest returns the messages of the plan provider's last step
// call.
func lastStepRequest(t *testing.T, p *planProvider) []model.Message {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.requests) - 1; i >= 0; i-- {
		if p.requests[i].purpose == "" {
			return p.requests[i].msgs
		}
	}
	t.Fatal("no step call was made")
	return nil
}

// TestCallsABudgetLeftUnrunAreAnswered: a hard budget stops the turn
// before the second of a step's two calls; that call is journaled as not
// run, and once the budget is raised the next turn's context answers it.
func TestCallsABudgetLeftUnrunAreAnswered(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		{ToolCalls: []model.ToolCall{
			{ID: "call_a", Name: "list_files", Arguments: json.RawMessage(`{}`)},
			{ID: "call_b", Name: "list_files", Arguments: json.RawMessage(`{"path":"."}`)},
		}},
		{Text: "after the budget was raised"},
	}}
	h := newHarnessConfigured(t, p, func(h *harness) store.Store { return h.store }, func(*engine.Config) {})
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"text":"unused: the model is planProvider"}]`, lt.ToolSpec{Name: "list_files"}), &lt.Budget{MaxToolCalls: 1})
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopBudgetExceeded, *s.StopReason)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	d := data[lt.ToolFailedData](t, failed[0])
	require.Equal(t, "call_b", d.CallID)
	require.Contains(t, d.Error, "not run: budget limit max_tool_calls reached")
	require.Empty(t, d.Interrupted, "nothing was cut: the call never started")
	require.Less(t, failed[0].Seq, seqOf(t, h, s.ID, lt.EventTurnFailed), "answered before its turn ends")

	more := int64(10)
	_, err := h.eng.UpdateBudget(ctx, s.ID, &lt.BudgetPatch{MaxToolCalls: &more})
	require.NoError(t, err)
	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "go on"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "after the budget was raised", mustTurnOutput(t, h, s))
	requireEveryCallAnswered(t, lastStepRequest(t, p))
	checkJournal(t, h.store, s.ID)
}

// TestCallAwaitingApprovalAnsweredInTheNextTurn: a cancel voids the
// approval a call waited for; the call stays without a result in the
// journal (it was neither run nor refused by a person), and the next
// turn's context answers it with a note, before the person's new input.
func TestCallAwaitingApprovalAnsweredInTheNextTurn(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		{ToolCalls: []model.ToolCall{{ID: "call_a", Name: "shell", Arguments: json.RawMessage(`{"command":"true"}`)}}},
		{Text: "after the cancel"},
	}}
	h := newHarnessConfigured(t, p, func(h *harness) store.Store { return h.store }, func(*engine.Config) {})
	ctx := context.Background()
	sp := spec(t, `[{"text":"unused: the model is planProvider"}]`, lt.ToolSpec{Name: "shell"})
	sp.Policies = []lt.Policy{{Name: "commands", Tool: "shell", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	cancelNow(t, h, s.ID)
	requireCancelled(t, h, s.ID)
	require.Empty(t, events(t, h, s.ID, lt.EventToolFailed, lt.EventToolCompleted))

	_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "go on"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "after the cancel", mustTurnOutput(t, h, s))
	msgs := lastStepRequest(t, p)
	requireEveryCallAnswered(t, msgs)
	n := len(msgs)
	require.Equal(t, model.RoleTool, msgs[n-2].Role)
	require.Equal(t, "call_a", msgs[n-2].CallID)
	require.True(t, msgs[n-2].IsError)
	require.Contains(t, msgs[n-2].Text, "the turn ended before this call finished")
	require.Equal(t, model.Message{Role: model.RoleUser, Text: "go on"}, msgs[n-1])
	checkJournal(t, h.store, s.ID)
}

// TestCallsAPersonsStopLeftUnrunAreAnswered: a person stops the turn at
// the approval of a step's first call (written by the API, not the
// runner); the step's second call is journaled as not run, why included,
// and the next turn's context answers both.
func TestCallsAPersonsStopLeftUnrunAreAnswered(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		{ToolCalls: []model.ToolCall{
			{ID: "call_a", Name: "shell", Arguments: json.RawMessage(`{"command":"true"}`)},
			{ID: "call_b", Name: "list_files", Arguments: json.RawMessage(`{}`)},
		}},
		{Text: "after the stop"},
	}}
	h := newHarnessConfigured(t, p, func(h *harness) store.Store { return h.store }, func(*engine.Config) {})
	ctx := context.Background()
	sp := spec(t, `[{"text":"unused: the model is planProvider"}]`, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "list_files"})
	sp.Policies = []lt.Policy{{Name: "commands", Tool: "shell", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionStop, Reason: "not today"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopStopped, *s.StopReason)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 2)
	require.Equal(t, "call_a", data[lt.ToolFailedData](t, failed[0]).CallID, "refused by the person's stop")
	d := data[lt.ToolFailedData](t, failed[1])
	require.Equal(t, "call_b", d.CallID)
	require.Equal(t, "not run: stopped by a person: not today", d.Error)

	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "go on"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "after the stop", mustTurnOutput(t, h, s))
	requireEveryCallAnswered(t, lastStepRequest(t, p))
	checkJournal(t, h.store, s.ID)
}

// TestCallCancelledBeforeItsRetryClosesItsEffect: a cancel during the
// backoff of a call that failed transiently: the call, waiting to run
// again, is journaled as not run again, with its effect, which closes with
// that outcome rather than its last transient error.
func TestCallCancelledBeforeItsRetryClosesItsEffect(t *testing.T) {
	rt := &flakyTool{name: "remote", class: lt.EffectIdempotent, failures: 100, retryAfter: 2 * time.Hour, keys: make(chan string, 10)}
	h := newHarness(t, rt)
	h.clock.mu.Lock()
	h.clock.holdHours = true // the two hours' backoff never ends by itself
	h.clock.mu.Unlock()
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"remote","arguments":{}}]},{"text":"never"}]`, lt.ToolSpec{Name: "remote"}), nil)
	waitEvent(t, h, s.ID, lt.EventToolFailed)
	cancelNow(t, h, s.ID)
	s = requireCancelled(t, h, s.ID)
	require.Equal(t, int32(1), rt.calls.Load(), "not run again after the cancel")

	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 2)
	first, last := data[lt.ToolFailedData](t, failed[0]), data[lt.ToolFailedData](t, failed[1])
	require.True(t, first.Retry)
	require.Equal(t, first.EffectID, last.EffectID)
	require.Equal(t, "not run again: the session was cancelled: stop now", last.Error)
	require.Equal(t, lt.RefusedTurnEnded, last.Refused)
	require.Equal(t, "cancelled", last.Interrupted)
	effects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, lt.EffectFailed, effects[0].Status)
	require.Equal(t, "not run again: the session was cancelled: stop now", effects[0].Error)
	checkJournal(t, h.store, s.ID)
}

// TestCallDecidedNotToHaveHappenedThenCancelled: an irreversible call a
// cancel cut midway is in doubt; a person decides it did not happen, so
// it is due again, and the cancel then ends the turn: the call is not run
// again, and says so (its effect was closed by the decision).
func TestCallDecidedNotToHaveHappenedThenCancelled(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	cmd := uniqueSleep()
	args, err := json.Marshal(map[string]string{"command": cmd})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`, lt.ToolSpec{Name: "shell"}), nil)
	waitProcs(t, cmd, 1)
	cancelNow(t, h, s.ID)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	s = requireCancelled(t, h, s.ID)
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 1, "not run again")
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.NotEmpty(t, failed)
	d := data[lt.ToolFailedData](t, failed[len(failed)-1])
	require.Equal(t, "not run again: the session was cancelled: stop now", d.Error)
	require.Equal(t, lt.RefusedTurnEnded, d.Refused)
	require.Empty(t, d.EffectID, "its effect was closed by the decision")
	checkJournal(t, h.store, s.ID)
}
