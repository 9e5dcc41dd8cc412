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

// pauseWithin is how long a pause may take to take effect once the call
// in flight has finished, and a resumed session to get going again.
const pauseWithin = 10 * time.Second

// longhaulCLI runs the binary's client command against srv and returns its
// output.
func longhaulCLI(t *testing.T, srv *server, args ...string) string {
	t.Helper()
	out, err := exec.Command(longhaulBin, append(args, "--server", srv.url)...).CombinedOutput()
	require.NoError(t, err, "longhaul %v: %s", args, out)
	return string(out)
}

// slowStepSession creates a session whose first model call takes delay and
// asks for a shell command, and whose second answers "done".
func slowStepSession(ctx context.Context, t *testing.T, srv *server, delay time.Duration) *lt.Session {
	t.Helper()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				map[string]any{"delay_ms": delay.Milliseconds(), "tool_calls": []any{toolCall("shell", map[string]any{"command": "echo ran"})}},
				finalText("done"))},
			Tools: []lt.ToolSpec{{Name: "shell", Effect: lt.EffectIdempotent}},
		},
		Input: "Think, then run a command.",
	})
	require.NoError(t, err)
	waitFor(t, pauseWithin, "the model call to start", func() (bool, error) {
		return len(eventsOf(ctx, t, srv.api, s.ID, lt.EventModelRequested)) > 0, nil
	})
	return s
}

// TestPause_RunningSession: `longhaul pause` on a session whose model call
// is in flight: show says the pause is requested; the call finishes (it is
// not cut), the session is paused before the command it asked for runs,
// and show says paused; `longhaul resume` and the turn completes.
func TestPause_RunningSession(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := slowStepSession(ctx, t, srv, 6*time.Second)

	require.Contains(t, longhaulCLI(t, srv, "pause", s.ID, "--reason", "lunch"), "Pause requested for "+s.ID)
	require.Regexp(t, `(?m)^Status: +running \(pause requested\)$`, longhaulCLI(t, srv, "show", s.ID))

	got := waitStatus(ctx, t, srv, s.ID, pauseWithin+6*time.Second, lt.SessionPaused)
	require.False(t, got.PauseRequested)
	require.Equal(t, "lunch", got.PauseReason)
	require.Regexp(t, `(?m)^Status: +paused$`, longhaulCLI(t, srv, "show", s.ID))
	require.Len(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventModelResponded), 1, "the call in flight finished")
	require.Empty(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventModelFailed), "a pause cuts nothing")
	require.Empty(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventToolStarted), "nothing starts once paused")
	require.Contains(t, longhaulCLI(t, srv, "ls", "--status", "paused"), s.ID)

	require.Contains(t, longhaulCLI(t, srv, "resume", s.ID), "Resumed "+s.ID)
	got = waitTerminal(ctx, t, srv, s.ID, pauseWithin)
	requireStatus(ctx, t, srv, got, lt.SessionIdle)
	require.Len(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventToolCompleted), 1)
	events := longhaulCLI(t, srv, "events", s.ID)
	require.Regexp(t, `session\.pause_requested +at the next safe point: lunch`, events)
	require.Regexp(t, `session\.resumed +after .* paused`, events)
	requireGapFree(t, s.ID, journal(ctx, t, srv.api, s.ID))
}

// TestPause_FromAnotherNodeAcrossACrash: two nodes share PostgreSQL; the
// node that does not run the session takes the pause; the running node is
// killed (-9) before its call ends, so the pause is carried out by the node
// that picks the session up, before it runs anything. Resumed, the session
// makes the dead node's call again and completes.
func TestPause_FromAnotherNodeAcrossACrash(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.FreshSchema(t), multiLeaseTTL)
	a := c.nodes[c.add()]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := slowStepSession(ctx, t, a, 20*time.Second)
	b := c.nodes[c.add()] // started once node a holds the session

	got, err := b.api.Pause(ctx, s.ID, &lt.PauseRequest{Reason: "from b"})
	require.NoError(t, err)
	require.True(t, got.PauseRequested, "node a runs it: the pause waits for its call")
	a.kill()

	got = waitStatus(ctx, t, b, s.ID, multiLeaseTTL+pauseWithin, lt.SessionPaused)
	require.Equal(t, "from b", got.PauseReason)
	require.Len(t, eventsOf(ctx, t, b.api, s.ID, lt.EventModelRequested), 1, "nothing ran before the pause")
	require.Empty(t, eventsOf(ctx, t, b.api, s.ID, lt.EventToolStarted))

	_, err = b.api.Resume(ctx, s.ID)
	require.NoError(t, err)
	got = waitTerminal(ctx, t, b, s.ID, 20*time.Second+pauseWithin)
	requireStatus(ctx, t, b, got, lt.SessionIdle)
	require.Len(t, eventsOf(ctx, t, b.api, s.ID, lt.EventToolCompleted), 1)
}

// TestPause_FromAnotherNode: a pause taken by the node that does not run
// the session reaches the one that does at its next safe point: the call
// in flight finishes there and the session pauses before the next one.
func TestPause_FromAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.FreshSchema(t), multiLeaseTTL)
	a := c.nodes[c.add()]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := slowStepSession(ctx, t, a, 4*time.Second)
	b := c.nodes[c.add()]

	_, err := b.api.Pause(ctx, s.ID, nil)
	require.NoError(t, err)
	got := waitStatus(ctx, t, b, s.ID, 4*time.Second+pauseWithin, lt.SessionPaused)
	require.False(t, got.PauseRequested)
	responded := eventsOf(ctx, t, b.api, s.ID, lt.EventModelResponded)
	require.Len(t, responded, 1, "node a's call finished")
	require.Equal(t, nodeIDOf(t, a), responded[0].WorkerID)
	require.Empty(t, eventsOf(ctx, t, b.api, s.ID, lt.EventToolStarted))
}

// TestPause_TreeFromAnotherNode: two nodes share PostgreSQL; a tree of
// sub-agents runs on the first, and the second takes a pause of its root.
// The pause reaches every sub-agent, each paused by the node that runs it
// at its next safe point; the second node's resume lets the whole tree run
// to its end, nothing of it started while paused.
func TestPause_TreeFromAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.FreshSchema(t), multiLeaseTTL)
	a := c.nodes[c.add()]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, kids := startBusyTree(ctx, t, a)
	b := c.nodes[c.add()]

	_, err := b.api.Pause(ctx, root, &lt.PauseRequest{Reason: "from b"})
	require.NoError(t, err)
	for _, k := range kids {
		got := waitStatus(ctx, t, b, k.ID, pauseWithin, lt.SessionPaused)
		require.Equal(t, root, got.PauseParentID)
		require.Equal(t, "from b", got.PauseReason)
	}
	_, err = b.api.Resume(ctx, root)
	require.NoError(t, err)
	got := waitTerminal(ctx, t, b, root, 90*time.Second)
	requireStatus(ctx, t, b, got, lt.SessionIdle)
	requireHeldWhilePaused(ctx, t, b, kids)
}
