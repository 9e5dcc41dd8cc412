package report_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestMonitorCostApart: the model monitor's cost is in a task's cost and
// apart as monitor_cost_usd, against a known sequence: a parent reviewed at
// each of its 3 steps and its child at its 1 step, every review costing
// 0.03125; a task without a monitor has none.
func TestMonitorCostApart(t *testing.T) {
	t.Parallel()
	day := time.Date(2030, 6, 10, 9, 0, 0, 0, time.UTC)
	h := newHarness(t, day)
	review := map[string]any{"text": `{"verdict":"ok"}`, "cost_usd": 0.03125}
	monitorScript, err := json.Marshal([]any{review, review, review})
	require.NoError(t, err)
	monitor := &lt.MonitorSpec{Model: &lt.ModelSpec{Provider: "scripted", Name: "watcher", Script: monitorScript}, EverySteps: 1}

	child, err := json.Marshal(spec(t, nil, nil, step(0.25, "", "child done")))
	require.NoError(t, err)
	parentSpec := spec(t, []lt.ToolSpec{{Name: "spawn_agent"}, {Name: "wait_agents"}}, nil,
		step(0.125, "spawn_agent", `{"agent_spec": `+string(child)+`, "input": "sub-task"}`),
		step(0.0625, "wait_agents", `{}`),
		step(0.0625, "", "parent done"),
	)
	parentSpec.Monitor = monitor
	parent := h.start(lt.CreateSessionRequest{AgentSpec: &parentSpec})
	ps := h.waitStatus(parent, lt.SessionIdle)
	plain := h.start(lt.CreateSessionRequest{AgentSpec: ptr(spec(t, nil, nil, step(0.5, "", "done")))})
	h.waitStatus(plain, lt.SessionIdle)

	// Parent: 0.25 of its own steps and 3 × 0.03125 of reviews; its child
	// 0.25 and one review.
	require.InDelta(t, 0.625, ps.Usage.CostUSD, 1e-9)
	require.InDelta(t, 0.125, ps.Usage.MonitorCostUSD, 1e-9)

	rep := h.report("since=2030-06-09T00:00:00Z&until=2030-06-12T00:00:00Z")
	byID := map[string]lt.TaskRecord{}
	for _, r := range rep.Data {
		byID[r.ID] = r
	}
	require.InDelta(t, 0.625, byID[parent].CostUSD, 1e-9)
	require.InDelta(t, 0.125, byID[parent].MonitorCostUSD, 1e-9)
	require.InDelta(t, 0.125, byID[parent].Usage.MonitorCostUSD, 1e-9)
	require.InDelta(t, 0.28125, byID[parent].SubagentCostUSD, 1e-9, "the child's review is in its cost")
	require.Zero(t, byID[plain].MonitorCostUSD)
	require.InDelta(t, 1.125, rep.Totals.CostUSD, 1e-9)
	require.InDelta(t, 0.125, rep.Totals.MonitorCostUSD, 1e-9)

	// Each session's own, with the sub-agents listed apart: the same sum.
	rep = h.report("since=2030-06-09T00:00:00Z&until=2030-06-12T00:00:00Z&include_subagents=true")
	require.Len(t, rep.Data, 3)
	require.InDelta(t, 0.125, rep.Totals.MonitorCostUSD, 1e-9)
	for _, r := range rep.Data {
		if r.ParentID != nil {
			require.InDelta(t, 0.03125, r.MonitorCostUSD, 1e-9)
		}
	}
}
