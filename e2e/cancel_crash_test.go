package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A cancel survives a crash between its request and its effect: the
// request is durable once answered (session.cancel_requested), so the
// server started again on the same data ends the turn before anything else
// runs, and an irreversible command the crash cut is settled first (an
// in_doubt action) rather than forgotten.
//
// On one SQLite node the server is stepped (crashwindow_test.go) and
// killed once, stopped, it has answered the cancel while the request is
// still the journal's last event: inside the window by what the test saw.
// Should the engine journal its effect before the answer reaches the
// client (the answer and the effect are a few instructions apart), the
// round checks the same promises and is run again, up to
// cancelCrashRounds; one round inside is required. Across two nodes
// sharing PostgreSQL the precondition is made certain: the node running
// the session is stopped (SIGSTOP) before the other node takes the
// cancel, and killed while stopped.

// cancelCrashRounds bounds the rounds run until one kill lands between the
// cancel's request and its effect.
const cancelCrashRounds = 20

// cancelCrashLeaseTTL is the cluster's lease TTL: longer than the test's
// steps between the stop and the kill, so no other node claims the stopped
// node's session meanwhile; the node restarted on its data directory frees
// its own leases at once.
const cancelCrashLeaseTTL = 30 * time.Second

// cancelCrashKill cancels the session and SIGKILLs the server once it has
// answered (crashKillAfter), then starts it again on the same data
// directory; it returns the time the dead incarnation was gone, after
// which every event is the new one's, and whether the kill came before
// the cancel's effect.
func cancelCrashKill(t *testing.T, srv *server, id string) (dead time.Time, inside bool) {
	t.Helper()
	got, dead, inside := crashKillAfter(t, srv, id, "cancel", `{"reason":"crash test"}`, lt.EventSessionCancelRequested)
	require.True(t, got.CancelRequested, "the cancel is pending until it has taken effect")
	return dead, inside
}

// crashKillAfter posts body to the session's control endpoint (cancel,
// steer), journaled as an event of type request, and SIGKILLs the server
// once it has answered, before the effect if it can (crashInWindow), then
// starts it again on the same data directory. It returns the session as
// answered, the time the dead incarnation was gone, and whether the
// request was then still the journal's last event.
func crashKillAfter(t *testing.T, srv *server, id, control, body, request string) (lt.Session, time.Time, bool) {
	t.Helper()
	answer, dead, inside := crashInWindow(t, srv, id, control, body, request)
	var got lt.Session
	require.NoError(t, json.Unmarshal(answer, &got))
	srv.restart()
	return got, dead, inside
}

// requireNothingAfterCancel fails if a model call or a tool call started
// after the session's cancel request, and returns the journal.
func requireNothingAfterCancel(ctx context.Context, t *testing.T, srv *server, id string) []lt.Event {
	t.Helper()
	evs := journal(ctx, t, srv.api, id)
	requireGapFree(t, id, evs)
	cancelSeq := int64(0)
	for _, ev := range evs {
		switch {
		case ev.Type == lt.EventSessionCancelRequested:
			require.Zero(t, cancelSeq, "one cancel request in the journal")
			cancelSeq = ev.Seq
		case cancelSeq > 0 && (ev.Type == lt.EventModelRequested || ev.Type == lt.EventToolStarted):
			require.Failf(t, "a call started after the cancel request",
				"seq %d %s after the cancel request (seq %d):\n%s", ev.Seq, ev.Type, cancelSeq, describeJournal(evs))
		}
	}
	require.Positive(t, cancelSeq, "the cancel request is in the journal")
	return evs
}

// lastOf returns the last event of typ in evs.
func lastOf(t *testing.T, evs []lt.Event, typ string) lt.Event {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	require.Failf(t, "no such event", "no %s in the journal:\n%s", typ, describeJournal(evs))
	return lt.Event{}
}

// TestCancelCrash_SlowModelCall: the server is killed after a cancel of a
// session in a 60 s model call was answered and before it took effect; the
// server started again cancels the session at once: no model call or tool
// call starts after the request, the scripted model's tool call never
// runs, and the cancel is no longer pending.
func TestCancelCrash_SlowModelCall(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--sandbox", "local") // no command runs: no sandbox to start
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	between := 0
	for round := 1; round <= cancelCrashRounds && between == 0; round++ {
		s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{
				Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
					map[string]any{"delay_ms": 60000, "tool_calls": []any{toolCall("shell", map[string]any{"command": "true"})}}, finalText("never"))},
				Tools: []lt.ToolSpec{{Name: "shell"}},
			},
			Input: "Think hard.",
		})
		require.NoError(t, err)
		waitFor(t, cancelWithin, "the model call to start", func() (bool, error) {
			return len(eventsOf(ctx, t, srv.api, s.ID, lt.EventModelRequested)) > 0, nil
		})
		dead, inside := cancelCrashKill(t, srv, s.ID)
		got := waitTerminal(ctx, t, srv, s.ID, cancelWithin)
		requireStatus(ctx, t, srv, got, lt.SessionCancelled)
		require.Equal(t, lt.StopCancelled, deref(got.StopReason))
		require.False(t, got.CancelRequested, "the cancel has taken effect")
		evs := requireNothingAfterCancel(ctx, t, srv, s.ID)
		require.Len(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventModelRequested), 1)
		require.Empty(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventModelResponded, lt.EventToolStarted))
		if inside {
			require.True(t, lastOf(t, evs, lt.EventTurnCancelled).Time.After(dead),
				"killed before the cancel's effect, yet the turn was cancelled before the kill:\n%s", describeJournal(evs))
			between++
		} else {
			t.Logf("round %d: the cancel took effect before the kill; running another round", round)
		}
	}
	require.Positive(t, between, "in %d rounds no kill came between the cancel's request and its effect", cancelCrashRounds)
}

// TestCancelCrash_IrreversibleCommandInDoubt: the server is killed after a
// cancel of a session running an irreversible shell command was answered;
// the command dies with the server, and the server started again holds the
// cancel: the call's outcome is unknown, so it is an in_doubt action, the
// session shows the cancel still requested, and only once a person decides
// is the session cancelled; the command is not run again.
func TestCancelCrash_IrreversibleCommandInDoubt(t *testing.T) {
	t.Parallel()
	// The command runs on the host (no sandbox), so the host's process
	// table shows it and its end.
	srv := startServer(t, "--sandbox", "local")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	between := 0
	for round := 1; round <= cancelCrashRounds && between == 0; round++ {
		sleep := "sleep 30." + wallMarker()
		s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{
				// exec: the command is the shell's own process, which dies
				// with the server (its parent-death signal).
				Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep("echo started; exec "+sleep), finalText("never"))},
				Tools: []lt.ToolSpec{{Name: "shell"}},
			},
			Input: "Deploy.",
		})
		require.NoError(t, err)
		wallAwaitProcs(ctx, t, srv, s.ID, sleep)
		dead, inside := cancelCrashKill(t, srv, s.ID)
		wallRequireGone(t, cancelWithin, sleep)

		got := waitStatus(ctx, t, srv, s.ID, cancelWithin, lt.SessionRequiresAction)
		require.True(t, got.CancelRequested, "the cancel is held until the call is settled")
		require.Len(t, got.RequiredActions, 1)
		act := got.RequiredActions[0]
		require.Equal(t, lt.ActionInDoubt, act.Type)
		require.Regexp(t, `(?m)^Status: +requires_action \(cancel requested\)$`, cancelShow(t, srv, s.ID))
		doubt := lastOf(t, journal(ctx, t, srv.api, s.ID), lt.EventEffectInDoubt)

		_, err = srv.api.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
		require.NoError(t, err)
		got = waitTerminal(ctx, t, srv, s.ID, cancelWithin)
		requireStatus(ctx, t, srv, got, lt.SessionCancelled)
		require.False(t, got.CancelRequested, "the cancel has taken effect")
		requireNothingAfterCancel(ctx, t, srv, s.ID)
		require.Len(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventToolStarted), 1, "not run again")
		require.Len(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventModelRequested), 1)
		if inside {
			// Raised by the server started again: the killed one never
			// learned of the cancel's effect on its command.
			require.True(t, doubt.Time.After(dead), "killed before the cancel's effect, yet the doubt was raised before the kill")
			require.Contains(t, act.Summary, "stopped before its outcome was recorded")
			between++
		} else {
			t.Logf("round %d: the cancel cut the command before the kill; running another round", round)
		}
	}
	require.Positive(t, between, "in %d rounds no kill came between the cancel's request and its effect", cancelCrashRounds)
}

// cancelCrashStopped stops node a, which runs the session, with SIGSTOP,
// cancels the session through node b, and requires the precondition the
// stop makes certain (crashStopped); then it kills a and starts it again.
func cancelCrashStopped(ctx context.Context, t *testing.T, a, b *server, id string) {
	t.Helper()
	crashStopped(ctx, t, a, b, id, lt.EventSessionCancelRequested, func() {
		got, err := b.api.Cancel(ctx, id, &lt.CancelRequest{Reason: "crash test"})
		require.NoError(t, err)
		require.True(t, got.CancelRequested)
	})
}

// crashStopped stops node a, which runs the session, with SIGSTOP, sends a
// control through node b (send), and requires the precondition the stop
// makes certain: the request (an event of type request) is the journal's
// last event, the session still runs, and no cancel has taken effect. Then
// it kills a (SIGKILL, while stopped) and starts it again on its data
// directory.
func crashStopped(ctx context.Context, t *testing.T, a, b *server, id, request string, send func()) {
	t.Helper()
	a.pause()
	send()
	evs := journal(ctx, t, b.api, id)
	require.Equal(t, request, evs[len(evs)-1].Type, "the request is the journal's last event:\n%s", describeJournal(evs))
	got, err := b.api.GetSession(ctx, id)
	require.NoError(t, err)
	require.Equal(t, lt.SessionRunning, got.Status)
	a.restart()
}

// TestCancelCrash_AcrossNodes: two nodes share PostgreSQL; node a runs a
// session in a 60 s model call and is stopped (SIGSTOP) before node b takes
// a cancel, so the cancel is certainly durable and without effect when a is
// killed (SIGKILL) and started again on its data directory; then the
// session is cancelled at once, and nothing started after the request.
func TestCancelCrash_AcrossNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.FreshSchema(t), cancelCrashLeaseTTL)
	a := c.nodes[c.add()]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := a.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				map[string]any{"delay_ms": 60000, "tool_calls": []any{toolCall("shell", map[string]any{"command": "true"})}}, finalText("never"))},
			Tools: []lt.ToolSpec{{Name: "shell"}},
		},
		Input: "Think hard.",
	})
	require.NoError(t, err)
	waitFor(t, cancelWithin, "the model call to start", func() (bool, error) {
		return len(eventsOf(ctx, t, a.api, s.ID, lt.EventModelRequested)) > 0, nil
	})
	b := c.nodes[c.add()] // started once node a holds the session
	cancelCrashStopped(ctx, t, a, b, s.ID)
	got := waitTerminal(ctx, t, b, s.ID, cancelWithin)
	requireStatus(ctx, t, b, got, lt.SessionCancelled)
	require.False(t, got.CancelRequested, "the cancel has taken effect")
	requireNothingAfterCancel(ctx, t, b, s.ID)
	require.Len(t, eventsOf(ctx, t, b.api, s.ID, lt.EventModelRequested), 1)
	require.Empty(t, eventsOf(ctx, t, b.api, s.ID, lt.EventModelResponded, lt.EventToolStarted, lt.EventModelFailed),
		"the stopped node never learned of the cancel: its call was not journaled as abandoned")
}

// TestCancelCrash_AcrossNodesCommandInDoubt is the same for an
// irreversible shell command in flight on node a: killed with a, it is in
// doubt once a is back, and the cancel is held until a person decides.
func TestCancelCrash_AcrossNodesCommandInDoubt(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.FreshSchema(t), cancelCrashLeaseTTL)
	a := c.nodes[c.add()]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sleep := "sleep 30." + wallMarker()
	s, err := a.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep("echo started; exec "+sleep), finalText("never"))},
			Tools: []lt.ToolSpec{{Name: "shell"}},
		},
		Input: "Deploy.",
	})
	require.NoError(t, err)
	wallAwaitProcs(ctx, t, a, s.ID, sleep)
	b := c.nodes[c.add()]
	cancelCrashStopped(ctx, t, a, b, s.ID)
	wallRequireGone(t, cancelWithin, sleep)

	got := waitStatus(ctx, t, b, s.ID, cancelWithin, lt.SessionRequiresAction)
	require.True(t, got.CancelRequested, "the cancel is held until the call is settled")
	require.Len(t, got.RequiredActions, 1)
	act := got.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Contains(t, act.Summary, "stopped before its outcome was recorded")
	require.Empty(t, eventsOf(ctx, t, b.api, s.ID, lt.EventToolFailed, lt.EventToolCompleted))

	_, err = b.api.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	got = waitTerminal(ctx, t, b, s.ID, cancelWithin)
	requireStatus(ctx, t, b, got, lt.SessionCancelled)
	require.False(t, got.CancelRequested, "the cancel has taken effect")
	requireNothingAfterCancel(ctx, t, b, s.ID)
	require.Len(t, eventsOf(ctx, t, b.api, s.ID, lt.EventToolStarted), 1, "not run again")
	require.Len(t, eventsOf(ctx, t, b.api, s.ID, lt.EventModelRequested), 1)
}
