package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPauseWalkOvertakenByAResumeLeavesNoSubagentPaused: a pause walks the
// tree after its write to the root; a resume of the root answered in
// between (another person, another tab) finds no sub-agent paused yet.
// The pause's walk, which reads the parent it follows at each step, then
// pauses none: nothing is left paused "with its parent" under a parent
// that runs, waiting for a resume nobody would send.
func TestPauseWalkOvertakenByAResumeLeavesNoSubagentPaused(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	ctx := context.Background()
	tr := startPauseTree(t, h, gt)

	// Person 1's pause: its first write.
	require.NoError(t, h.eng.PauseAloneForTest(ctx, tr.root))
	// Person 2's resume, answered in full meanwhile.
	r := resume(t, h, tr.root)
	require.Equal(t, lt.SessionWaiting, r.Status)
	// Person 1's pause goes on: its walk of the tree.
	require.NoError(t, h.eng.PauseSubagentsForTest(ctx, tr.root, "lunch"))

	root := session(t, h, tr.root)
	require.NotEqual(t, lt.SessionPaused, root.Status)
	require.False(t, root.PauseRequested)
	for _, id := range []string{tr.a, tr.b} {
		s := session(t, h, id)
		require.False(t, s.Status == lt.SessionPaused || s.PauseRequested,
			"sub-agent %s is paused (pause_parent_id %q) with a parent that is not paused (%s)", id, s.PauseParentID, root.Status)
	}
}

// resumedAloneTree starts a tree (startPauseTree, g's model call held at
// the gate), pauses it, and resumes the root alone: a resume cut short
// after its first write, its sub-agents still paused.
func resumedAloneTree(t *testing.T) (*harness, *gate, pauseTree) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	tr := startPauseTree(t, h, gt)
	pauseNow(t, h, tr.root)
	require.NoError(t, h.eng.ResumeAloneForTest(context.Background(), tr.root))
	return h, gt, tr
}

// TestResumeWalkOvertakenByAPauseResumesNoSubagent: the same two steps in
// a resume. A pause of the root answered between the resume's write and
// its walk leaves the sub-agents paused with the root; the resume's walk
// then resumes none of them (the root is paused again), and nothing of the
// tree runs in the shared workspace.
func TestResumeWalkOvertakenByAPauseResumesNoSubagent(t *testing.T) {
	// Person 1's resume: its first write.
	h, gt, tr := resumedAloneTree(t)
	ctx := context.Background()
	// Person 2's pause, answered in full meanwhile.
	p := pauseNow(t, h, tr.root)
	require.Equal(t, lt.SessionPaused, p.Status)
	// Person 1's resume goes on: its walk of the tree.
	require.NoError(t, h.eng.ResumeSubagentsForTest(ctx, tr.root))

	require.Equal(t, lt.SessionPaused, session(t, h, tr.root).Status, "the root is paused (person 2's pause)")
	// g's model call answers: g must pause at its safe point, not write.
	gt.open(t)
	h.waitStatus(tr.g, lt.SessionPaused, lt.SessionIdle)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.root).Status)
	require.Zero(t, len(events(t, h, tr.g, lt.EventToolStarted)), "g started its write_file in the shared workspace while its root is paused")
	for _, id := range []string{tr.a, tr.b, tr.g} {
		s := session(t, h, id)
		require.True(t, s.Status == lt.SessionPaused || s.PauseRequested,
			"sub-agent %s is %s while its root is paused", id, s.Status)
	}
}

// TestWaitAgentsTimeoutLeavesOutTheTreesPause: a root waits for its
// sub-agent with wait_agents timeout_seconds 60 and is paused, with the
// sub-agent, for ten minutes. The sub-agent could do nothing meanwhile, so
// the wait's timeout moves by the time paused, as the turn's deadline and
// the wall clock do: on resume it is not due at once.
func TestWaitAgentsTimeoutLeavesOutTheTreesPause(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	kid := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("ask_human", map[string]any{"question": "which colour?"})}},
		map[string]any{"text": "b done"},
	), "ask_human")
	root := create(t, h, spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": kid, "input": "do b"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{"timeout_seconds": 60})}},
		map[string]any{"text": "root done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "ask_human"}), nil)
	h.waitStatus(root.ID, lt.SessionWaiting)
	kids := children(t, h, root.ID)
	require.Len(t, kids, 1)
	h.waitStatus(kids[0].ID, lt.SessionRequiresAction)

	pauseNow(t, h, root.ID)
	require.Equal(t, lt.SessionPaused, session(t, h, kids[0].ID).Status, "the sub-agent is paused with the root")
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx)) // no worker: the rows are read as the resume leaves them
	cancel()
	h.clock.Advance(10 * time.Minute)
	resume(t, h, root.ID)

	row, err := h.store.SessionGet(ctx, root.ID)
	require.NoError(t, err)
	require.NotNil(t, row.WakeAt)
	require.True(t, row.WakeAt.After(h.clock.Now()),
		"the root's wait_agents is due at %s, now is %s: it times out at once though its sub-agent was paused with it the whole time", row.WakeAt, h.clock.Now())
}

// TestPersonsOwnPauseOfASubagentPausedWithItsParentIsKept: a person pauses
// the root, then sub-agent b by itself too. b's pause becomes the
// person's, so the root's resume leaves it paused (docs/api.md: one a
// person paused by itself keeps that pause).
func TestPersonsOwnPauseOfASubagentPausedWithItsParentIsKept(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	tr := startPauseTree(t, h, gt)

	pauseNow(t, h, tr.root)
	b := pauseNow(t, h, tr.b) // 200
	require.Equal(t, lt.SessionPaused, b.Status)
	resume(t, h, tr.root)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.b).Status, "b, which a person paused by itself, was resumed with the root")
}

// TestTreePauseCountsAsOneDecision: the tally counts a person's decisions
// per actor (reports: decisions_by_actor). One pause and one resume of a
// root are counted in the root, not again in each sub-agent they reached.
func TestTreePauseCountsAsOneDecision(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	ctx := context.Background()
	tr := startPauseTree(t, h, gt)

	_, err := h.eng.PauseSession(as(aliceOperator), tr.root, &lt.PauseRequest{Reason: "lunch"})
	require.NoError(t, err)
	_, err = h.eng.ResumeSession(as(aliceOperator), tr.root, &lt.ResumeRequest{})
	require.NoError(t, err)
	for _, id := range []string{tr.a, tr.b, tr.g} {
		row, err := h.store.SessionGet(ctx, id)
		require.NoError(t, err)
		var st journal.State
		require.NoError(t, json.Unmarshal(row.State, &st))
		require.Empty(t, st.Tally.Decisions, "sub-agent %s counts alice's one pause and one resume of the root as its own decisions", id)
	}
}

// TestSubagentsOwnPauseCannotBeResumedUnderItsRootsPause: a person paused
// sub-agent g by itself, then the root (the whole tree, they mean). g
// keeps its own pause, but resuming it alone is a 409 naming the root
// while the root is paused: g does not run, nor write the shared
// workspace, under its root's pause.
func TestSubagentsOwnPauseCannotBeResumedUnderItsRootsPause(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	tr := startPauseTree(t, h, gt)

	pauseNow(t, h, tr.g) // requested: g's call is in flight
	pauseNow(t, h, tr.root)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.a).Status)
	_, err := h.eng.ResumeSession(context.Background(), tr.g, &lt.ResumeRequest{})
	require.ErrorContains(t, err, "a sub-agent under "+tr.root+", which is paused", "its own pause, under its root's")
	gt.open(t)
	h.waitStatus(tr.g, lt.SessionPaused, lt.SessionIdle)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.root).Status)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.a).Status)
	require.Zero(t, len(events(t, h, tr.g, lt.EventToolStarted)), "g started its write_file while its root and its parent are paused")
}

// startParkedTwins: a root spawns two sub-agents of one spec, each of which
// spawns a grandchild that asks a person, and waits for it; the root waits
// for both. Everything is parked; the engine is then stopped, so the rows
// stay as the API leaves them. It returns the root and its children in the
// order the store lists them (the order a walk visits them).
func startParkedTwins(t *testing.T, h *harness) (root string, kids []string) {
	t.Helper()
	g := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("ask_human", map[string]any{"question": "which colour?"})}},
		map[string]any{"text": "g done"},
	), "ask_human")
	mid := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": g, "input": "do g"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "mid done"},
	), "spawn_agent", "wait_agents", "ask_human")
	s := create(t, h, spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent_spec": mid, "input": "do x"}),
			toolCall("spawn_agent", map[string]any{"agent_spec": mid, "input": "do y"}),
		}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "all done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "ask_human"}), nil)
	h.waitStatus(s.ID, lt.SessionWaiting)
	rows, err := h.store.SessionList(context.Background(), &store.SessionListParams{ParentID: s.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, r := range rows {
		h.waitStatus(r.ID, lt.SessionWaiting)
		gk := children(t, h, r.ID)
		require.Len(t, gk, 1)
		h.waitStatus(gk[0].ID, lt.SessionRequiresAction)
		kids = append(kids, r.ID)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()
	return s.ID, kids
}

// TestPauseWalkGoesThroughASubagentBeingCancelled: the first sub-agent
// the walk visits is being cancelled (its cancel accepted, not carried out
// yet: held by an in-doubt call, or not claimed yet). The walk leaves it
// as it is and goes on: its own running child is paused with it (it may
// run as long as a held cancel lasts), and so is its sibling.
func TestPauseWalkGoesThroughASubagentBeingCancelled(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	root, kids := startParkedTwins(t, h)

	_, err := h.eng.CancelSession(ctx, kids[0], &lt.CancelRequest{Reason: "not needed"})
	require.NoError(t, err)
	p := pauseNow(t, h, root)
	require.Equal(t, lt.SessionPaused, p.Status)

	// Repeating the pause, as the docs advise for a walk cut short,
	// stops at the same place.
	pauseNow(t, h, root)
	second := session(t, h, kids[1])
	require.Equal(t, lt.SessionPaused, second.Status,
		"sub-agent %s runs (%s) under its paused root: the walk stopped at its sibling being cancelled", kids[1], second.Status)
	first := session(t, h, kids[0])
	require.True(t, first.CancelRequested)
	require.NotEqual(t, lt.SessionPaused, first.Status, "a sub-agent being cancelled is left as it is")
	gx := children(t, h, kids[0])
	require.Len(t, gx, 1)
	require.Equal(t, lt.SessionPaused, session(t, h, gx[0].ID).Status, "what the stopping sub-agent spawned is paused too")
	require.Equal(t, kids[0], session(t, h, gx[0].ID).PauseParentID)

	// The root's resume goes through the stopping sub-agent too.
	resume(t, h, root)
	require.NotEqual(t, lt.SessionPaused, session(t, h, gx[0].ID).Status)
	require.NotEqual(t, lt.SessionPaused, session(t, h, kids[1]).Status)
}

// TestPersonsPauseOfARequestedSubagentSurvivesItsWorker: g's call is in
// flight when the root is paused (g: pause_requested with parent a); a
// person then pauses g by itself, which makes the pause theirs. g's
// worker journals session.paused at its safe point: the pause stays the
// person's, with their reason, and the root's resume leaves g paused.
func TestPersonsPauseOfARequestedSubagentSurvivesItsWorker(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	tr := startPauseTree(t, h, gt)

	pauseNow(t, h, tr.root)
	require.True(t, session(t, h, tr.g).PauseRequested)
	g, err := h.eng.PauseSession(as(aliceOperator), tr.g, &lt.PauseRequest{Reason: "look at g"})
	require.NoError(t, err)
	require.Empty(t, g.PauseParentID)
	gt.open(t)
	h.waitStatus(tr.g, lt.SessionPaused)
	g = session(t, h, tr.g)
	require.Empty(t, g.PauseParentID, "the worker's session.paused gave the pause back to the parent")
	resume(t, h, tr.root)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.g).Status)
	require.Equal(t, "look at g", session(t, h, tr.g).PauseReason, "the person's own pause shows their reason")
}

// TestPersonsPauseOfAPausedSubagentIsTheirs: the parked b is paused with
// the root ("lunch"); a person pauses b by itself with a reason of their
// own. The pause is theirs now, with their reason and actor.
func TestPersonsPauseOfAPausedSubagentIsTheirs(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	tr := startPauseTree(t, h, gt)

	pauseNow(t, h, tr.root)
	b, err := h.eng.PauseSession(as(aliceOperator), tr.b, &lt.PauseRequest{Reason: "look at b"})
	require.NoError(t, err)
	require.Empty(t, b.PauseParentID)
	require.Equal(t, "look at b", b.PauseReason)
}

// TestNoTurnStartsASubagentUnderAPausedRoot: a person's follow-up turn on
// a sub-agent whose turn is over would start it in the tree's workspace;
// under a paused root it is a 409 naming the root, and once the root is
// resumed it is taken.
func TestNoTurnStartsASubagentUnderAPausedRoot(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	ctx := context.Background()
	tr := startPauseTree(t, h, gt)
	answerAsk(t, h, tr.b, "blue")
	h.waitStatus(tr.b, lt.SessionIdle)

	pauseNow(t, h, tr.root)
	_, err := h.eng.CreateTurn(ctx, tr.b, &lt.CreateTurnRequest{Input: "one more thing"})
	require.ErrorContains(t, err, "a sub-agent under "+tr.root+", which is paused")
	require.Equal(t, lt.SessionIdle, session(t, h, tr.b).Status, "nothing was queued")

	resume(t, h, tr.root)
	_, err = h.eng.CreateTurn(ctx, tr.b, &lt.CreateTurnRequest{Input: "one more thing"})
	require.NoError(t, err)
}

// TestResumeOfASubagentBeingCancelledUnderAPausedRoot: the root's pause
// went through a sub-agent being cancelled and paused what it spawned,
// naming it. A resume of that sub-agent, which is not paused itself, is a
// 409 naming the root while the root is paused: it does not let its own
// sub-agents go on under the root's pause.
func TestResumeOfASubagentBeingCancelledUnderAPausedRoot(t *testing.T) {
	h := newHarness(t)
	root, mid, gx := startCancelledUnderPausedRoot(t, h)

	_, err := h.eng.ResumeSession(context.Background(), mid, &lt.ResumeRequest{})
	require.ErrorContains(t, err, "a sub-agent under "+root+", which is paused")
	require.Equal(t, lt.SessionPaused, session(t, h, gx).Status, "what it spawned stays paused with the root")
}

// startCancelledUnderPausedRoot cancels one of startParkedTwins' sub-agents
// (mid) and then pauses the root, whose walk goes through mid and pauses
// what it spawned (gx), naming mid.
func startCancelledUnderPausedRoot(t *testing.T, h *harness) (root, mid, gx string) {
	t.Helper()
	root, kids := startParkedTwins(t, h)
	mid = kids[0]
	_, err := h.eng.CancelSession(context.Background(), mid, &lt.CancelRequest{Reason: "not needed"})
	require.NoError(t, err)
	pauseNow(t, h, root)
	below := children(t, h, mid)
	require.Len(t, below, 1)
	require.Equal(t, mid, session(t, h, below[0].ID).PauseParentID)
	return root, mid, below[0].ID
}

// TestSettledPauseOfATreeIsJournaledWithItsPausersActor: bob's resume of
// the root walks the tree; alice's pause of the root is written before
// bob's walk ends, and bob's walk, settling, pauses the sub-agents with
// alice's pause. Their session.paused names alice, who asked for the
// pause, not bob, who asked for the resume.
func TestSettledPauseOfATreeIsJournaledWithItsPausersActor(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	alice := engine.WithActor(context.Background(), lt.Actor{Name: "alice", Role: lt.RoleOperator})
	bob := engine.WithActor(context.Background(), lt.Actor{Name: "bob", Role: lt.RoleOperator})
	tr := startPauseTree(t, h, gt)
	_, err := h.eng.PauseSession(alice, tr.root, &lt.PauseRequest{Reason: "first look"})
	require.NoError(t, err)

	// Bob's resume: its write and its walk, which resumes a and b.
	require.NoError(t, h.eng.ResumeAloneForTest(bob, tr.root))
	require.NoError(t, h.eng.ResumeSubagentsForTest(bob, tr.root))
	require.NotEqual(t, lt.SessionPaused, session(t, h, tr.b).Status)
	// Alice's second pause: its write (its walk comes later).
	require.NoError(t, h.eng.PauseAloneForTest(alice, tr.root))
	// Bob's walk ends: the root is paused again, and the tree follows.
	require.NoError(t, h.eng.SettleTreeForTest(bob, tr.root, false))

	b := session(t, h, tr.b)
	require.Equal(t, lt.SessionPaused, b.Status)
	paused := events(t, h, tr.b, lt.EventSessionPaused)
	last := data[lt.SessionPausedData](t, paused[len(paused)-1])
	require.NotNil(t, last.Actor)
	require.Equal(t, "alice", last.Actor.Name, "the sub-agent's pause is alice's")
	require.Equal(t, "cut short", last.Reason)
}
