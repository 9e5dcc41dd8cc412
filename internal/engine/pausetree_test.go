package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// pauseTree is a tree of sub-agents caught mid-work: the root waits for
// two children; child a waits for its own child g, whose model call is
// held at the gate; child b waits for a person (ask_human).
type pauseTree struct {
	root, a, b, g string
}

func startPauseTree(t *testing.T, h *harness, gt *gate) pauseTree {
	t.Helper()
	g := childSpec(script(t,
		map[string]any{"delay_ms": 1000, "tool_calls": []any{toolCall("write_file", map[string]any{"path": "g.txt", "content": "g"})}},
		map[string]any{"text": "g done"},
	), "write_file")
	a := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": g, "input": "do g"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "a done"},
	), "spawn_agent", "wait_agents", "write_file")
	b := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("ask_human", map[string]any{"question": "which colour?"})}},
		map[string]any{"text": "b done"},
	), "ask_human")
	root := spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent_spec": a, "input": "do a"}),
			toolCall("spawn_agent", map[string]any{"agent_spec": b, "input": "do b"}),
		}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "all done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "ask_human"},
		lt.ToolSpec{Name: "write_file", Effect: lt.EffectIdempotent})
	s := create(t, h, root, nil)
	gt.await(t) // g's call is in flight
	var tr pauseTree
	tr.root = s.ID
	// b's spawn may still be on its way when g's call starts.
	deadline := time.Now().Add(10 * time.Second)
	for len(children(t, h, s.ID)) < 2 {
		require.True(t, time.Now().Before(deadline), "the root spawned both children")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
	for _, k := range children(t, h, s.ID) {
		if k.Input == "do a" {
			tr.a = k.ID
		} else {
			tr.b = k.ID
		}
	}
	require.NotEmpty(t, tr.a)
	require.NotEmpty(t, tr.b)
	kids := children(t, h, tr.a)
	require.Len(t, kids, 1)
	tr.g = kids[0].ID
	h.waitStatus(tr.root, lt.SessionWaiting)
	h.waitStatus(tr.a, lt.SessionWaiting)
	h.waitStatus(tr.b, lt.SessionRequiresAction)
	return tr
}

// finishPauseTree lets g's call answer and b's question be answered, and
// waits for the tree to end as it would have without a pause.
func finishPauseTree(t *testing.T, h *harness, gt *gate, tr pauseTree) {
	t.Helper()
	gt.open(t)
	answerAsk(t, h, tr.b, "blue")
	s := h.waitStatus(tr.root, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", s.StopReason)
	require.Equal(t, "all done", mustTurnOutput(t, h, s))
}

func session(t *testing.T, h *harness, id string) *lt.Session {
	t.Helper()
	s, err := h.eng.GetSession(context.Background(), id)
	require.NoError(t, err)
	return s
}

// TestPauseReachesTheWholeTree: pausing a session pauses each of its
// running sub-agents and theirs (a parked one at once, a running one at
// its next safe point: the call in flight finishes, the next does not
// start), each naming the parent whose pause it follows; a sub-agent paused
// with its parent cannot be resumed alone; the parent's resume resumes the
// whole tree, which then runs to its end.
func TestPauseReachesTheWholeTree(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	ctx := context.Background()
	tr := startPauseTree(t, h, gt)

	p := pauseNow(t, h, tr.root)
	require.Equal(t, lt.SessionPaused, p.Status)
	require.Empty(t, p.PauseParentID, "the root's pause is the person's")
	for id, parent := range map[string]string{tr.a: tr.root, tr.b: tr.root} {
		s := session(t, h, id)
		require.Equal(t, lt.SessionPaused, s.Status, "a parked sub-agent is paused at once")
		require.Equal(t, parent, s.PauseParentID)
		require.Equal(t, "lunch", s.PauseReason)
		requireReleased(t, h, id)
	}
	g := session(t, h, tr.g)
	require.True(t, g.PauseRequested, "a running sub-agent of a sub-agent is asked to pause")
	require.Equal(t, tr.a, g.PauseParentID)
	req := events(t, h, tr.g, lt.EventSessionPauseRequested)
	require.Len(t, req, 1)
	d := data[lt.SessionPauseRequestedData](t, req[0])
	require.Equal(t, tr.a, d.Parent)

	gt.open(t) // g's call answers; its write_file must not start
	h.waitStatus(tr.g, lt.SessionPaused)
	requireReleased(t, h, tr.g)
	require.Empty(t, events(t, h, tr.g, lt.EventToolStarted), "no call starts in a paused sub-agent")
	paused := events(t, h, tr.g, lt.EventSessionPaused)
	require.Len(t, paused, 1)
	require.Equal(t, tr.a, data[lt.SessionPausedData](t, paused[0]).Parent, "the worker's session.paused keeps the parent")

	// Pausing again changes nothing, in the root or below.
	again := pauseNow(t, h, tr.root)
	require.Equal(t, p.LastEventSeq, again.LastEventSeq)
	require.Len(t, events(t, h, tr.a, lt.EventSessionPaused), 1)

	// A sub-agent paused with its parent goes on only with it.
	_, err := h.eng.ResumeSession(ctx, tr.g, &lt.ResumeRequest{})
	require.ErrorContains(t, err, "resume "+tr.root, "the highest session paused is named")
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 409, ae.Status)
	_, err = h.eng.ResumeSession(ctx, tr.a, &lt.ResumeRequest{})
	require.ErrorContains(t, err, "a sub-agent under "+tr.root+", which is paused")
	require.Equal(t, lt.SessionPaused, session(t, h, tr.a).Status)

	r := resume(t, h, tr.root)
	require.Equal(t, lt.SessionWaiting, r.Status)
	for _, id := range []string{tr.a, tr.b, tr.g} {
		s := session(t, h, id)
		require.NotEqual(t, lt.SessionPaused, s.Status, "session %s", id)
		require.Empty(t, s.PauseParentID)
		resumed := events(t, h, id, lt.EventSessionResumed)
		require.Len(t, resumed, 1)
		require.NotEmpty(t, data[lt.SessionResumedData](t, resumed[0]).Parent)
	}
	answerAsk(t, h, tr.b, "blue")
	s := h.waitStatus(tr.root, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", s.StopReason)
	require.Equal(t, "all done", mustTurnOutput(t, h, s))
	require.Len(t, events(t, h, tr.g, lt.EventToolCompleted), 1, "g's call ran once, after the resume")
	for _, id := range []string{tr.root, tr.a, tr.b, tr.g} {
		checkJournal(t, h.store, id)
	}
}

// TestPauseOfATreeKeepsAPersonsOwnPause: a sub-agent a person paused by
// itself keeps that pause through its parent's pause and resume, and is
// resumed by the person alone.
func TestPauseOfATreeKeepsAPersonsOwnPause(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	tr := startPauseTree(t, h, gt)

	pauseNow(t, h, tr.b)
	pauseNow(t, h, tr.root)
	require.Empty(t, session(t, h, tr.b).PauseParentID, "b's pause stays the person's")
	resume(t, h, tr.root)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.b).Status, "the root's resume leaves b's own pause")
	require.Equal(t, lt.SessionWaiting, session(t, h, tr.a).Status)
	require.Equal(t, lt.SessionRequiresAction, resume(t, h, tr.b).Status)

	finishPauseTree(t, h, gt, tr)
}

// TestPauseOrResumeOfATreeCutShortIsMadeWholeByRepeatingIt: the sessions
// of a tree are separate journals, so a request cut short after its first
// write (a crash, a lost connection) leaves the tree half done; repeating
// it finishes the walk: a repeated pause pauses the sub-agents, and a
// repeated resume of a session no longer paused resumes the sub-agents
// paused with it (a 409 only when there are none).
func TestPauseOrResumeOfATreeCutShortIsMadeWholeByRepeatingIt(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	ctx := context.Background()
	tr := startPauseTree(t, h, gt)

	require.NoError(t, h.eng.PauseAloneForTest(ctx, tr.root))
	require.Equal(t, lt.SessionWaiting, session(t, h, tr.a).Status)
	pauseNow(t, h, tr.root)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.a).Status)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.b).Status)
	require.True(t, session(t, h, tr.g).PauseRequested)

	require.NoError(t, h.eng.ResumeAloneForTest(ctx, tr.root))
	require.Equal(t, lt.SessionPaused, session(t, h, tr.a).Status)
	r := resume(t, h, tr.root)
	require.Equal(t, lt.SessionWaiting, r.Status)
	require.Equal(t, lt.SessionWaiting, session(t, h, tr.a).Status)
	require.Equal(t, lt.SessionRequiresAction, session(t, h, tr.b).Status)
	require.False(t, session(t, h, tr.g).PauseRequested, "g's request is withdrawn")

	_, err := h.eng.ResumeSession(ctx, tr.root, &lt.ResumeRequest{})
	require.ErrorContains(t, err, "is not paused", "nothing left to resume")

	finishPauseTree(t, h, gt, tr)
}

// TestCancelOfAPausedTreeEndsIt: a cancel of a paused root ends its turn
// and stops its sub-agents, paused with it or not.
func TestCancelOfAPausedTreeEndsIt(t *testing.T) {
	gt := newGate()
	h := newGatedHarness(t, gt)
	tr := startPauseTree(t, h, gt)

	pauseNow(t, h, tr.root)
	_, err := h.eng.CancelSession(context.Background(), tr.root, &lt.CancelRequest{Reason: "enough"})
	require.NoError(t, err)
	h.waitStatus(tr.root, lt.SessionCancelled)
	h.waitStatus(tr.a, lt.SessionCancelled)
	h.waitStatus(tr.b, lt.SessionCancelled)
	h.waitStatus(tr.g, lt.SessionCancelled) // its call in flight is cut
	require.Empty(t, events(t, h, tr.g, lt.EventToolStarted))
}

// answerAsk answers the ask_human action session id waits on.
func answerAsk(t *testing.T, h *harness, id, answer string) {
	t.Helper()
	s := h.waitStatus(id, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	_, err := h.eng.DecideAction(context.Background(), id, s.RequiredActions[0].ID, &lt.Decision{Answer: answer})
	require.NoError(t, err)
}
