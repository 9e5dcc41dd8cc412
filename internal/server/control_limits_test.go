package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Budgets and stop conditions through the real HTTP API (issue 3): no loop
// spends past its boundary by more than one step. Helpers are in
// control_test.go.

// writeSteps is an always-continue script: n steps, each writing perStep
// distinct files, each step reporting the same usage and cost.
func writeSteps(n, perStep int) []scripted.Step {
	in, out, cost := int64(100), int64(10), 0.01
	steps := make([]scripted.Step, n)
	for i := range steps {
		for j := range perStep {
			steps[i].ToolCalls = append(steps[i].ToolCalls, scripted.ToolCall{
				Name: "write_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path": "out/%d-%d.txt", "content": "step %d"}`, i, j, i)),
			})
		}
		steps[i].Usage = &scripted.Usage{InputTokens: &in, OutputTokens: &out}
		steps[i].CostUSD = &cost
	}
	return steps
}

// TestBudgetHardLimits runs an always-continue model into each hard limit:
// the turn stops with budget_exceeded, having spent at most one step past
// the limit.
func TestBudgetHardLimits(t *testing.T) {
	t.Parallel()
	root := newHarness(t, harnessOpts{})
	for _, tc := range []struct {
		name    string
		budget  lt.Budget
		perStep float64 // what one step spends in this dimension
		used    func(lt.Usage) float64
	}{
		{"model_calls", lt.Budget{MaxModelCalls: 10}, 1, func(u lt.Usage) float64 { return float64(u.ModelCalls) }},
		{"tool_calls", lt.Budget{MaxToolCalls: 9}, 2, func(u lt.Usage) float64 { return float64(u.ToolCalls) }},
		{"tokens", lt.Budget{MaxTokens: 1000}, 110, func(u lt.Usage) float64 { return float64(u.InputTokens + u.OutputTokens) }},
		{"cost_usd", lt.Budget{MaxCostUSD: 0.1}, 0.01, func(u lt.Usage) float64 { return u.CostUSD }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := root.forT(t)
			spec := agent(t, []lt.ToolSpec{{Name: "write_file"}}, nil, writeSteps(200, 2)...)
			budget := tc.budget
			s := h.start(sessionBody(t, spec, &budget))
			s = h.requireFailed(s.ID, lt.StopBudgetExceeded)

			evs := h.events(s.ID)
			exceeded := dataOf[lt.BudgetExceededData](t, evs, lt.EventBudgetExceeded)
			require.Len(t, exceeded, 1)
			require.Equal(t, tc.name, exceeded[0].Limit)
			limit := exceeded[0].Max
			used := tc.used(s.Usage)
			require.InDelta(t, used, exceeded[0].Used, 1e-9)
			require.GreaterOrEqual(t, used, limit)
			// Before the last step the usage was below the limit (the 1e-9
			// absorbs float sums of cost).
			require.Less(t, used-limit, tc.perStep+1e-9, "overspend is bounded by one step")
			if tc.name == "tool_calls" {
				require.Equal(t, limit, used, "tool calls are checked one by one")
			}
			require.Less(t, s.Usage.ModelCalls, int64(20), "the always-continue model was stopped early")

			warnings := dataOf[lt.BudgetWarningData](t, evs, lt.EventBudgetWarning)
			require.Len(t, warnings, 1, "one warning at 80 %%")
			require.Equal(t, tc.name, warnings[0].Limit.Name)
			require.Equal(t, limit, warnings[0].Limit.Max)
			require.GreaterOrEqual(t, warnings[0].Limit.Used, 0.8*limit-1e-9)
			require.Less(t, warnings[0].Limit.Used, limit)
		})
	}
}

func TestBudgetSoftLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	spec := agent(t, []lt.ToolSpec{{Name: "write_file"}}, nil, writeSteps(200, 1)...)
	s := h.start(sessionBody(t, spec, &lt.Budget{SoftModelCalls: 3, MaxModelCalls: 50}))

	a := h.waitAction(s.ID, lt.ActionBudget)
	require.Equal(t, &lt.BudgetLimit{Name: "model_calls", Soft: 3, Max: 50, Used: 3}, a.Limit)
	require.NotNil(t, a.Usage)
	require.Equal(t, int64(3), a.Usage.ModelCalls)
	require.NotEmpty(t, a.Summary)
	require.Equal(t, int64(3), decode[lt.Session](t, h.get("/v1/sessions/"+s.ID)).Usage.ModelCalls, "waiting spends nothing")

	requireError(t, h.decide(s.ID, a.ID, `{"decision": "reject", "reason": "x"}`), http.StatusBadRequest, lt.CodeInvalidRequest, "decision")
	requireError(t, h.decide(s.ID, a.ID, `{"decision": "approve", "budget": {"soft_model_calls": 60}}`), http.StatusBadRequest, lt.CodeInvalidRequest, "budget.soft_model_calls")
	h.decideOK(s.ID, a.ID, `{"decision": "approve", "budget": {"soft_model_calls": 5}}`)

	b := h.waitAction(s.ID, lt.ActionBudget)
	require.NotEqual(t, a.ID, b.ID)
	require.Equal(t, &lt.BudgetLimit{Name: "model_calls", Soft: 5, Max: 50, Used: 5}, b.Limit)
	require.Equal(t, lt.Budget{SoftModelCalls: 5, MaxModelCalls: 50}, decode[lt.Session](t, h.get("/v1/sessions/"+s.ID)).Budget)
	h.decideOK(s.ID, b.ID, `{"decision": "stop"}`)

	s = h.requireFailed(s.ID, lt.StopBudgetExceeded)
	require.Equal(t, int64(5), s.Usage.ModelCalls)
	require.Len(t, ofType(h.events(s.ID), lt.EventActionResolved), 2)
}

func TestBudgetPatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	patch := func(id, body string) lt.Session {
		t.Helper()
		r := h.do(http.MethodPatch, "/v1/sessions/"+id+"/budget", []byte(body), nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		return decode[lt.Session](t, r)
	}

	// Lifting a soft limit resolves the pending budget action: the session
	// goes on by itself.
	spec := agent(t, []lt.ToolSpec{{Name: "write_file"}}, nil, append(writeSteps(3, 1), textStep("done"))...)
	s := h.start(sessionBody(t, spec, &lt.Budget{SoftModelCalls: 2}))
	h.waitAction(s.ID, lt.ActionBudget)
	patch(s.ID, `{"soft_model_calls": 0}`)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, int64(4), s.Usage.ModelCalls)
	resolved := dataOf[lt.ActionResolvedData](t, h.events(s.ID), lt.EventActionResolved)
	require.Len(t, resolved, 1)
	require.Equal(t, lt.DecisionApprove, resolved[0].Decision.Decision)

	// A session stopped by its hard limit continues with a new turn once
	// the budget allows.
	s = h.start(sessionBody(t, spec, &lt.Budget{MaxModelCalls: 3}))
	s = h.requireFailed(s.ID, lt.StopBudgetExceeded)
	require.Equal(t, int64(3), s.Usage.ModelCalls)
	require.Equal(t, lt.Budget{MaxModelCalls: 5}, patch(s.ID, `{"max_model_calls": 5}`).Budget)
	r := h.post("/v1/sessions/"+s.ID+"/turns", `{"input": "go on"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, int64(4), s.Usage.ModelCalls)
	turns := decode[lt.List[lt.Turn]](t, h.get("/v1/sessions/"+s.ID+"/turns"))
	require.Len(t, turns.Data, 2)
	require.Equal(t, lt.TurnCompleted, turns.Data[1].Status)
	require.Equal(t, "done", turns.Data[1].Output)
}

func TestStopConditions(t *testing.T) {
	t.Parallel()
	root := newHarness(t, harnessOpts{})

	t.Run("loop detection", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		step := callStep("list_files", `{"path": "."}`)
		spec := agent(t, []lt.ToolSpec{{Name: "list_files"}}, nil, step, step, step, step, step, textStep("done"))
		spec.MaxRepeatedCalls = 3
		s := h.start(sessionBody(t, spec, nil))
		s = h.requireFailed(s.ID, lt.StopLoopDetected)
		require.Equal(t, int64(3), s.Usage.ModelCalls)

		evs := h.events(s.ID)
		require.Len(t, ofType(evs, lt.EventToolCompleted), 2, "the first two calls ran")
		failed := dataOf[lt.ToolFailedData](t, evs, lt.EventToolFailed)
		require.Len(t, failed, 1)
		require.Equal(t, lt.RefusedLoop, failed[0].Refused)
		require.Equal(t, 3, failed[0].Step)
		require.Len(t, ofType(evs, lt.EventToolStarted), 2, "the repeated call never started")
	})

	t.Run("max steps", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		spec := agent(t, []lt.ToolSpec{{Name: "write_file"}}, nil, writeSteps(200, 1)...)
		spec.MaxSteps = 3
		s := h.start(sessionBody(t, spec, nil))
		s = h.requireFailed(s.ID, lt.StopMaxSteps)
		require.Equal(t, int64(3), s.Usage.ModelCalls)
	})

	t.Run("consecutive tool errors", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		var steps []scripted.Step
		for i := range 10 {
			steps = append(steps, callStep("read_file", fmt.Sprintf(`{"path": "missing-%d.txt"}`, i)))
		}
		spec := agent(t, []lt.ToolSpec{{Name: "read_file"}}, nil, steps...)
		spec.MaxConsecutiveToolErrors = 2
		s := h.start(sessionBody(t, spec, nil))
		s = h.requireFailed(s.ID, lt.StopToolErrors)
		require.Equal(t, int64(2), s.Usage.ModelCalls)
		require.Len(t, ofType(h.events(s.ID), lt.EventToolFailed), 2)
	})
}

// TestTurnTimeoutAndWallBudget jumps the clock while two sessions wait on
// the application: each stops at its next step, one by its turn timeout,
// the other by its wall-clock budget.
func TestTurnTimeoutAndWallBudget(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	h := newHarness(t, harnessOpts{clock: clock})
	spec := agent(t, []lt.ToolSpec{lookupTool}, nil, callStep("lookup", `{"id": "c-1"}`), textStep("done"))
	timed := spec
	timed.TurnTimeoutSeconds = 30
	s1 := h.start(sessionBody(t, timed, nil))
	s2 := h.start(sessionBody(t, spec, &lt.Budget{MaxWallSeconds: 30}))
	a1 := h.waitAction(s1.ID, lt.ActionFunctionCall)
	a2 := h.waitAction(s2.ID, lt.ActionFunctionCall)

	clock.advance(31 * time.Second)
	h.decideOK(s1.ID, a1.ID, `{"output": "found"}`)
	h.decideOK(s2.ID, a2.ID, `{"output": "found"}`)

	s1 = h.requireFailed(s1.ID, lt.StopTimeout)
	require.Equal(t, int64(1), s1.Usage.ModelCalls, "no model call after the timeout")
	s2 = h.requireFailed(s2.ID, lt.StopBudgetExceeded)
	require.Equal(t, int64(1), s2.Usage.ModelCalls)
	exceeded := dataOf[lt.BudgetExceededData](t, h.events(s2.ID), lt.EventBudgetExceeded)
	require.Len(t, exceeded, 1)
	require.Equal(t, "wall_seconds", exceeded[0].Limit)
}

// TestTurnTimeoutCutsAModelCall: a model call still running when the turn's
// time is up is cut at the deadline and not retried; the turn stops with
// timeout.
func TestTurnTimeoutCutsAModelCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	slow := textStep("too slow")
	slow.DelayMS = 60_000
	spec := agent(t, nil, nil, slow, textStep("never"))
	spec.TurnTimeoutSeconds = 1
	s := h.start(sessionBody(t, spec, nil))
	s = h.requireFailed(s.ID, lt.StopTimeout)
	failed := dataOf[lt.ModelFailedData](t, h.events(s.ID), lt.EventModelFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "timeout", failed[0].Kind)
	require.False(t, failed[0].Retry)
}

// TestPoliciesOnEngineToolsAreRefused: finish and ask_human touch nothing
// outside the session, so a policy naming them would never apply: it is
// refused rather than silently ignored.
func TestPoliciesOnEngineToolsAreRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for _, name := range []string{"ask_human", "finish"} {
		spec := agent(t, []lt.ToolSpec{{Name: name}}, []lt.Policy{{Tool: name, Decision: lt.PolicyDeny}}, textStep("done"))
		e := requireError(t, h.post("/v1/sessions", sessionBody(t, spec, nil)), http.StatusBadRequest, lt.CodeInvalidRequest, "agent_spec.policies[0].tool")
		require.Contains(t, e.Message, "policies do not apply")
	}
}
