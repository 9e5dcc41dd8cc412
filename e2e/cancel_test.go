package e2e

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// cancelWithin is how long a cancel may take to end a call in flight on the
// real binary: far less than the 20 s or 30 s the call would take.
const cancelWithin = 5 * time.Second

// cancelShow runs `longhaul show` against srv and returns what it printed.
func cancelShow(t *testing.T, srv *server, id string) string {
	t.Helper()
	out, err := exec.Command(longhaulBin, "show", id, "--server", srv.url).CombinedOutput()
	require.NoError(t, err, "longhaul show: %s", out)
	return string(out)
}

// TestCancel_SlowModelCall: a model call that would take 20 s is abandoned
// by a cancel: the session is cancelled within seconds, the call is
// journaled as interrupted by the cancel and counted, and nothing runs
// after it. The cancel's answer says it is pending.
func TestCancel_SlowModelCall(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				map[string]any{"delay_ms": 20000, "tool_calls": []any{toolCall("shell", map[string]any{"command": "true"})}}, finalText("never"))},
			Tools: []lt.ToolSpec{{Name: "shell"}},
		},
		Input: "Think hard.",
	})
	require.NoError(t, err)
	waitFor(t, cancelWithin, "the model call to start", func() (bool, error) {
		return len(eventsOf(ctx, t, srv.api, s.ID, lt.EventModelRequested)) > 0, nil
	})
	start := time.Now()
	got, err := srv.api.Cancel(ctx, s.ID, &lt.CancelRequest{Reason: "enough"})
	require.NoError(t, err)
	require.True(t, got.CancelRequested, "the cancel is pending until it has taken effect")

	got = waitTerminal(ctx, t, srv, s.ID, cancelWithin)
	requireStatus(ctx, t, srv, got, lt.SessionCancelled)
	require.Less(t, time.Since(start), cancelWithin)
	require.Equal(t, lt.StopCancelled, deref(got.StopReason))
	require.False(t, got.CancelRequested)
	failed := wallEvents(ctx, t, srv, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "cancelled", failed[0].Interrupted)
	require.Empty(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventModelResponded, lt.EventToolStarted))
	require.Positive(t, got.Usage.InputTokens, "the abandoned call's input is counted")
	require.Regexp(t, `(?m)^Status: +cancelled \(cancelled\)$`, cancelShow(t, srv, s.ID))
}

// TestCancel_IrreversibleCommandInDoubt: a cancel kills an irreversible
// command in the sandbox midway; the call is in doubt, and `longhaul show`
// says the cancel is still requested until a person decides; then the
// session is cancelled and the command is not run again.
func TestCancel_IrreversibleCommandInDoubt(t *testing.T) {
	t.Parallel()
	srv := wallSandboxServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sleep := "sleep 30." + wallMarker()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep("echo started; "+sleep), finalText("never"))},
			Tools: []lt.ToolSpec{{Name: "shell"}},
		},
		Input: "Deploy.",
	})
	require.NoError(t, err)
	wallAwaitProcs(ctx, t, srv, s.ID, sleep)
	_, err = srv.api.Cancel(ctx, s.ID, &lt.CancelRequest{Reason: "enough"})
	require.NoError(t, err)
	got := waitStatus(ctx, t, srv, s.ID, cancelWithin, lt.SessionRequiresAction)
	wallRequireGone(t, cancelWithin, sleep)
	require.True(t, got.CancelRequested)
	require.Len(t, got.RequiredActions, 1)
	act := got.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Contains(t, act.Summary, "interrupted in flight: the session was cancelled: enough")
	require.Regexp(t, `(?m)^Status: +requires_action \(cancel requested\)$`, cancelShow(t, srv, s.ID))

	_, err = srv.api.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	got = waitTerminal(ctx, t, srv, s.ID, cancelWithin)
	requireStatus(ctx, t, srv, got, lt.SessionCancelled)
	require.False(t, got.CancelRequested)
	require.Len(t, wallEvents(ctx, t, srv, s.ID, lt.EventToolStarted), 1, "not run again")
	require.Len(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventModelRequested), 1)
}

// TestCancel_FromAnotherNode: two nodes share PostgreSQL; a cancel taken
// by the node that does not run the session reaches the one that does (the
// store's notifier) and abandons its 20 s model call within seconds.
func TestCancel_FromAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.FreshSchema(t), multiLeaseTTL)
	a := c.nodes[c.add()]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := a.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, map[string]any{"delay_ms": 20000, "text": "too late"})}},
		Input:     "Think hard.",
	})
	require.NoError(t, err)
	waitFor(t, cancelWithin, "the model call to start", func() (bool, error) {
		return len(eventsOf(ctx, t, a.api, s.ID, lt.EventModelRequested)) > 0, nil
	})
	b := c.nodes[c.add()] // started once node a holds the session
	start := time.Now()
	got, err := b.api.Cancel(ctx, s.ID, &lt.CancelRequest{Reason: "from b"})
	require.NoError(t, err)
	require.True(t, got.CancelRequested)
	got = waitTerminal(ctx, t, b, s.ID, cancelWithin)
	requireStatus(ctx, t, b, got, lt.SessionCancelled)
	require.Less(t, time.Since(start), cancelWithin)
	failed := wallEvents(ctx, t, b, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "cancelled", failed[0].Interrupted)
	require.Empty(t, eventsOf(ctx, t, b.api, s.ID, lt.EventModelResponded))
}
