package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
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
	root := heldTreeSpec(t, marker, modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, verdictStep("pause", "a shell call nobody asked for")))
	s := create(t, h, root, nil)
	gt.await(t) // the child's first model call is in flight
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	require.Equal(t, lt.ActionMonitor, s.RequiredActions[0].Type)
	// The hold is carried down, then the root parks on it.
	waitUntil(t, 10*time.Second, func() bool { return len(events(t, h, s.ID, lt.EventMonitorHeld)) == 1 })
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	return heldTree{root: s.ID, child: kids[0].ID, action: s.RequiredActions[0].ID, marker: marker}
}

// heldTreeSpec is the root of startHeldTree, with its monitor.
func heldTreeSpec(t *testing.T, marker string, mon *lt.MonitorSpec) *lt.AgentSpec {
	t.Helper()
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
	root.Monitor = mon
	return root
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
	require.True(t, c.PauseRequested || c.Status == lt.SessionPaused, "the child is asked to pause before monitor.held: %s", c.Status)
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
	// The cancelled child still reports to its parent: its journal is
	// whole once it has.
	waitUntil(t, 10*time.Second, func() bool { return len(events(t, h, tr.child, lt.EventSubagentReported)) == 1 })
	checkJournal(t, h.store, tr.root)
	checkJournal(t, h.store, tr.child)
}

// gatedVerdict is a monitor model that answers pause once the test lets
// it.
type gatedVerdict struct {
	entered chan struct{}
	release chan struct{}
}

func (g *gatedVerdict) Respond(ctx context.Context, _ *model.Request) (*model.Response, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &model.Response{Text: `{"verdict": "pause", "reasons": ["a shell call nobody asked for"]}`}, nil
}

// await waits until the monitor's call waits for its verdict.
func (g *gatedVerdict) await(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the monitor was never called")
	}
}

// drainAsTheVerdictLands stops h's node while the monitor's call waits,
// then lets the verdict (pause) land: it is journaled as session id's
// worker stops, and the worker gives its lease back before the walk.
// finish ends the drain at once (a call still in flight is cut short).
func drainAsTheVerdictLands(t *testing.T, h *harness, mon *gatedVerdict, id string) (finish func()) {
	t.Helper()
	ctx := context.Background()
	stopCtx, stopNow := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- h.eng.Stop(stopCtx) }()
	waitUntil(t, 10*time.Second, h.eng.DrainingForTest)
	close(mon.release)
	waitUntil(t, 10*time.Second, func() bool {
		row, err := h.store.SessionGet(ctx, id)
		require.NoError(t, err)
		return row.Lease.Owner == ""
	})
	return func() {
		stopNow()
		require.NoError(t, <-stopped)
	}
}

// TestMonitorHoldSurvivesADrainBeforeItsWalk: the monitor's pause is
// journaled as the node drains (a deploy), so its worker stops before it
// carries the hold down. The session stays runnable until monitor.held is
// journaled: the next node's worker makes the walk, and the sub-agent is
// paused before it starts a call.
func TestMonitorHoldSurvivesADrainBeforeItsWalk(t *testing.T) {
	gt := newGate()
	mon := &gatedVerdict{entered: make(chan struct{}, 8), release: make(chan struct{})}
	h := newHarnessWith(t, map[string]model.Provider{"scripted": scripted.New(&scripted.Config{After: gt.after}), "gated": mon}, nil)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "marker")
	s := create(t, h, heldTreeSpec(t, marker, &lt.MonitorSpec{Model: &lt.ModelSpec{Provider: "gated"}, Before: []lt.EffectClass{lt.EffectIrreversible}}), nil)
	gt.await(t) // the child's first model call is in flight, and stays so
	mon.await(t)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	child := kids[0].ID

	finish := drainAsTheVerdictLands(t, h, mon, s.ID)
	require.Len(t, events(t, h, s.ID, lt.EventActionRequired), 1, "the monitor action is durable")
	require.Empty(t, events(t, h, s.ID, lt.EventMonitorHeld), "its hold was not carried down")
	finish() // the child's model call, still at the gate, is cut short
	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.True(t, row.Runnable, "a session whose hold is not carried down stays runnable")

	h.start("node-a")
	r := h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, r.RequiredActions, 1)
	// The next worker carries the hold down.
	waitUntil(t, 10*time.Second, func() bool {
		return len(events(t, h, s.ID, lt.EventMonitorHeld)) == 1
	})
	held := events(t, h, s.ID, lt.EventMonitorHeld)
	require.Equal(t, r.RequiredActions[0].ID, data[lt.MonitorHeldData](t, held[0]).ActionID)
	// The child's model call cut short is made again, before or after the
	// walk: it answers now, and the child's write_file must not start.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-gt.entered:
				select {
				case gt.release <- time.Time{}:
				case <-done:
					return
				}
			case <-done:
				return
			}
		}
	}()
	c := h.waitStatus(child, lt.SessionPaused)
	require.Equal(t, s.ID, c.PauseParentID)
	require.Empty(t, events(t, h, child, lt.EventToolStarted), "no call starts in the held sub-agent")
	row, err = h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.False(t, row.Runnable, "parked on the action once the hold is carried down")
}

// TestClaimLetsGoASubagentLeftPausedUnderASessionThatHoldsNothing: the
// decision to continue is written, but its request ends before it lets
// the held sub-agent go (a crash; or the walk of the hold, which had read
// the hold just before, paused it after the decision's walk). The
// session's next worker lets it go on rather than wait for it for ever.
func TestClaimLetsGoASubagentLeftPausedUnderASessionThatHoldsNothing(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	tr := startHeldTree(t, h, gt)
	gt.open(t)
	requireHeld(t, h, tr)

	require.NoError(t, h.eng.DecideActionAloneForTest(context.Background(), tr.root, tr.action, &lt.Decision{Decision: lt.DecisionContinue}))
	s := h.waitStatus(tr.root, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", s.StopReason)
	require.Equal(t, "all done", mustTurnOutput(t, h, s))
	require.Len(t, events(t, h, tr.child, lt.EventToolCompleted), 2, "the child wrote both files")
}

// TestMonitorHoldDueIsWalkedBeforeTheEnvironment: the monitor's pause is
// journaled as the node drains, and when the session is claimed again its
// runner is gone. The hold is carried down first (a walk needs no
// environment); before, the claim asked for the runner and parked on that
// while the hold left the row runnable: claimed again and again, the hold
// never walked.
func TestMonitorHoldDueIsWalkedBeforeTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	mon := &gatedVerdict{entered: make(chan struct{}, 8), release: make(chan struct{})}
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)},
		providers: map[string]model.Provider{"gated": mon}}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	rb := &runnerBackend{}
	h.wrapEnvironments = func(b environment.Backend) environment.Backend { rb.Backend = b; return rb }
	rb.connected.Store(true)
	h.start("node-a")
	ctx := context.Background()

	sp := onGPU(spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo ran > ran.txt"}}]},{"text":"done"}]`, irreversibleShell))
	sp.Monitor = &lt.MonitorSpec{Model: &lt.ModelSpec{Provider: "gated"}, Before: []lt.EffectClass{lt.EffectIrreversible}}
	s := create(t, h, sp, nil)
	mon.await(t)
	drainAsTheVerdictLands(t, h, mon, s.ID)()
	require.Len(t, events(t, h, s.ID, lt.EventActionRequired), 1)
	require.Empty(t, events(t, h, s.ID, lt.EventMonitorHeld))

	rb.connected.Store(false) // the runner went with the deploy
	h.start("node-a")
	waitUntil(t, 10*time.Second, func() bool { return len(events(t, h, s.ID, lt.EventMonitorHeld)) == 1 })
	waitUntil(t, 10*time.Second, func() bool {
		row, err := h.store.SessionGet(ctx, s.ID)
		require.NoError(t, err)
		return !row.Runnable && row.Lease.Owner == ""
	})
}

// TestClaimOfASubagentBeingCancelledResumesNothingUnderAPausedRoot: the
// root's pause went through a sub-agent being cancelled (mid) and paused
// what it spawned, naming mid. mid's claim, to carry out its cancel, lets
// nothing go on under the paused root.
func TestClaimOfASubagentBeingCancelledResumesNothingUnderAPausedRoot(t *testing.T) {
	h := newHarness(t)
	root, mid, gx := startCancelledUnderPausedRoot(t, h)

	h.start("node-a") // a worker claims mid for its cancel
	h.waitStatus(mid, lt.SessionCancelled, lt.SessionFailed, lt.SessionIdle)
	require.Equal(t, lt.SessionPaused, session(t, h, root).Status)
	require.Empty(t, events(t, h, gx, lt.EventSessionResumed), "resumed while its root is paused")
}

// TestClaimOfASubagentOnceHeldResumesNothingUnderAPausedRoot: as
// TestClaimOfASubagentBeingCancelledResumesNothingUnderAPausedRoot, with a
// mid its own monitor once held (a decided action): its claim looks for a
// hold a cut-short walk left (releaseStaleHold), and must not take what the
// root's pause paused for one.
func TestClaimOfASubagentOnceHeldResumesNothingUnderAPausedRoot(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "marker")
	var shell map[string]any
	require.NoError(t, json.Unmarshal([]byte(markerCall(marker)), &shell))
	g := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("ask_human", map[string]any{"question": "which colour?"})}},
		map[string]any{"text": "g done"},
	), "ask_human")
	mid := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("shell", shell["arguments"])}},
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": g, "input": "do g"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "mid done"},
	), "shell", "spawn_agent", "wait_agents", "ask_human")
	mid["monitor"] = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, verdictStep("pause", "a shell call nobody asked for"))
	root := create(t, h, spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": mid, "input": "do x"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "all done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "ask_human"}, irreversibleShell), nil)
	h.waitStatus(root.ID, lt.SessionWaiting)
	kids := children(t, h, root.ID)
	require.Len(t, kids, 1)
	m := h.waitStatus(kids[0].ID, lt.SessionRequiresAction)
	require.Len(t, m.RequiredActions, 1)
	require.Equal(t, lt.ActionMonitor, m.RequiredActions[0].Type)
	_, err := h.eng.DecideAction(ctx, m.ID, m.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionContinue})
	require.NoError(t, err)
	h.waitStatus(m.ID, lt.SessionWaiting)
	require.Equal(t, 1, markerLines(t, marker))
	below := children(t, h, m.ID)
	require.Len(t, below, 1)
	gx := below[0].ID
	h.waitStatus(gx, lt.SessionRequiresAction)
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()

	_, err = h.eng.CancelSession(ctx, m.ID, &lt.CancelRequest{Reason: "not needed"})
	require.NoError(t, err)
	pauseNow(t, h, root.ID)
	require.Equal(t, m.ID, session(t, h, gx).PauseParentID)
	h.start("node-a") // a worker claims mid for its cancel
	h.waitStatus(m.ID, lt.SessionCancelled, lt.SessionFailed, lt.SessionIdle)
	require.Equal(t, lt.SessionPaused, session(t, h, root.ID).Status)
	require.Empty(t, events(t, h, gx, lt.EventSessionResumed), "resumed while its root is paused")
	// mid's cancel reaches it too: it stays paused or ends, never runs.
	require.Contains(t, []lt.SessionStatus{lt.SessionPaused, lt.SessionCancelled}, session(t, h, gx).Status)
}
