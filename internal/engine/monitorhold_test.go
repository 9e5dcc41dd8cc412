package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// heldTree is a root whose model monitor pauses it before an irreversible
// call while its sub-agent's model call is held at the gate.
type heldTree struct {
	root, child, action, marker string
}

// startHeldTree: the root spawns a child that writes two files, one model
// call apart (its first call held at the gate), then runs an irreversible
// shell call, which its model monitor pauses; the root then waits for the
// child.
func startHeldTree(t *testing.T, h *harness, gt *gate) heldTree {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "marker")
	child := childSpec(script(t,
		map[string]any{"delay_ms": 1000, "tool_calls": []any{toolCall("write_file", map[string]any{"path": "c1.txt", "content": "1"})}},
		map[string]any{"tool_calls": []any{toolCall("write_file", map[string]any{"path": "c2.txt", "content": "2"})}},
		map[string]any{"text": "child done"},
	), "write_file")
	var shell map[string]any
	require.NoError(t, json.Unmarshal([]byte(markerCall(marker)), &shell))
	root := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "write the files"})}},
		map[string]any{"tool_calls": []any{toolCall("shell", shell["arguments"])}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "all done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, irreversibleShell,
		lt.ToolSpec{Name: "write_file", Effect: lt.EffectIdempotent})
	root.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, verdictStep("pause", "a shell call nobody asked for"))
	s := create(t, h, root, nil)
	gt.await(t) // the child's first model call is in flight
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	require.Equal(t, lt.ActionMonitor, s.RequiredActions[0].Type)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	return heldTree{root: s.ID, child: kids[0].ID, action: s.RequiredActions[0].ID, marker: marker}
}

// requireHeld asserts that the child is paused with the root's hold and
// that nothing started in it.
func requireHeld(t *testing.T, h *harness, tr heldTree) {
	t.Helper()
	c := h.waitStatus(tr.child, lt.SessionPaused)
	require.Equal(t, tr.root, c.PauseParentID)
	require.Contains(t, c.PauseReason, tr.action, "the reason names the monitor action")
	require.Contains(t, c.PauseReason, "a shell call nobody asked for")
	requireReleased(t, h, tr.child)
	require.Empty(t, events(t, h, tr.child, lt.EventToolStarted), "no call starts in a sub-agent its root's monitor holds")
	require.Equal(t, 0, markerLines(t, tr.marker))
}

// TestMonitorPauseHoldsTheSubagents: a model monitor's pause of a session
// pauses its running sub-agents at their next safe point (the call in
// flight answers, the next does not start); none can be resumed alone, a
// person's resume of the session does not release them
// while the monitor's action waits, and continue lets the whole tree go
// on to its end.
func TestMonitorPauseHoldsTheSubagents(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	ctx := context.Background()
	tr := startHeldTree(t, h, gt)

	c := session(t, h, tr.child)
	require.True(t, c.PauseRequested || c.Status == lt.SessionPaused, "the child is asked to pause before the root parks: %s", c.Status)
	require.Equal(t, tr.root, c.PauseParentID)
	gt.open(t) // the child's model answers; its write_file must not start
	requireHeld(t, h, tr)

	_, err := h.eng.ResumeSession(ctx, tr.child, &lt.ResumeRequest{})
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 409, ae.Status)
	require.ErrorContains(t, err, "decide its action "+tr.action)
	_, err = h.eng.ResumeSession(ctx, tr.root, &lt.ResumeRequest{})
	require.ErrorContains(t, err, "is not paused", "resuming the root does not bypass its monitor")

	// A person's pause and resume of the root while its monitor holds it:
	// the child stays paused.
	p := pauseNow(t, h, tr.root)
	require.Equal(t, lt.SessionPaused, p.Status)
	r := resume(t, h, tr.root)
	require.Equal(t, lt.SessionRequiresAction, r.Status)
	requireHeld(t, h, tr)

	h.restart("node-a")
	requireHeld(t, h, tr)

	_, err = h.eng.DecideAction(ctx, tr.root, tr.action, &lt.Decision{Decision: lt.DecisionContinue})
	require.NoError(t, err)
	c = session(t, h, tr.child)
	require.NotEqual(t, lt.SessionPaused, c.Status, "continue resumes the sub-agents the monitor held")
	resumed := events(t, h, tr.child, lt.EventSessionResumed)
	require.Len(t, resumed, 1)
	require.Equal(t, tr.root, data[lt.SessionResumedData](t, resumed[0]).Parent)

	s := h.waitStatus(tr.root, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", s.StopReason)
	require.Equal(t, "all done", mustTurnOutput(t, h, s))
	require.Equal(t, 1, markerLines(t, tr.marker))
	require.Len(t, events(t, h, tr.child, lt.EventToolCompleted), 2, "the child wrote both files")
	checkJournal(t, h.store, tr.root)
	checkJournal(t, h.store, tr.child)
}

// TestMonitorStopEndsTheSubagentsItHeld: stop at a monitor's pause ends
// the turn; the sub-agents it held are asked to stop while still paused
// and never run another call.
func TestMonitorStopEndsTheSubagentsItHeld(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	ctx := context.Background()
	tr := startHeldTree(t, h, gt)
	gt.open(t)
	requireHeld(t, h, tr)

	_, err := h.eng.DecideAction(ctx, tr.root, tr.action, &lt.Decision{Decision: lt.DecisionStop, Reason: "not this"})
	require.NoError(t, err)
	require.Empty(t, events(t, h, tr.child, lt.EventSessionResumed), "stop does not resume what the monitor held")
	c := h.waitStatus(tr.child, lt.SessionCancelled)
	require.Empty(t, events(t, h, tr.child, lt.EventToolStarted))
	require.Equal(t, lt.SessionCancelled, c.Status)
	s := h.waitStatus(tr.root, lt.SessionFailed)
	require.Equal(t, lt.StopStopped, *s.StopReason)
	require.Equal(t, 0, markerLines(t, tr.marker))
	checkJournal(t, h.store, tr.root)
	checkJournal(t, h.store, tr.child)
}
