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

// A steer survives a crash between its request and its effect as a cancel
// does (cancel_crash_test.go says how the kill is placed): once answered,
// the message is in the journal (turn.steered), so the model call made
// after the restart carries it, and nothing answers the turn without it.

// steerCrashMessage is what the tests steer with.
const steerCrashMessage = "Stop and summarise what you have."

// steerCrashSpec is an agent whose model calls each take a minute: the one
// cut (by the steer or the crash) and the one made again with the message.
func steerCrashSpec(t *testing.T) *lt.AgentSpec {
	t.Helper()
	slow := map[string]any{"delay_ms": 60000, "text": "too late"}
	return &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, slow, slow)}}
}

// steerCrashRequested is what the tests read of model.requested.
type steerCrashRequested struct {
	Step    int    `json:"step"`
	Purpose string `json:"purpose"`
	Steers  int    `json:"steers"`
}

// awaitSteeredCall waits until a step's model call carrying the steering
// message has started after the message, and returns that model.requested
// and the journal then: the steer has reached the model.
func awaitSteeredCall(ctx context.Context, t *testing.T, srv *server, id string) (lt.Event, []lt.Event) {
	t.Helper()
	var call lt.Event
	var evs []lt.Event
	waitFor(t, cancelWithin, "the model call carrying the steering message", func() (bool, error) {
		evs = journal(ctx, t, srv.api, id)
		steered := false
		for _, ev := range evs {
			switch ev.Type {
			case lt.EventTurnSteered:
				steered = true
			case lt.EventModelRequested:
				var d steerCrashRequested
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					return false, err
				}
				if steered && d.Purpose == "" && d.Steers == 1 {
					call = ev
					return true, nil
				}
			}
		}
		return false, nil
	})
	return call, evs
}

// requireSteerCarried checks the journal once the steered call started:
// one message, carried by the step's call made again (the same step), and
// no answer in between; then it cancels the session, whose call would take
// a minute, and requires it cancelled.
func requireSteerCarried(ctx context.Context, t *testing.T, srv *server, id string, call lt.Event, evs []lt.Event) {
	t.Helper()
	requireGapFree(t, id, evs)
	steers := 0
	for _, ev := range evs {
		if ev.Type == lt.EventTurnSteered {
			steers++
			require.Contains(t, string(ev.Data), steerCrashMessage)
		}
	}
	require.Equal(t, 1, steers, "one steering message in the journal")
	var d steerCrashRequested
	require.NoError(t, json.Unmarshal(call.Data, &d))
	require.Equal(t, 1, d.Step, "the step's call made again, not a new step")
	require.Empty(t, eventsOf(ctx, t, srv.api, id, lt.EventModelResponded, lt.EventTurnCompleted))

	_, err := srv.api.Cancel(ctx, id, &lt.CancelRequest{Reason: "done"})
	require.NoError(t, err)
	got := waitTerminal(ctx, t, srv, id, cancelWithin)
	requireStatus(ctx, t, srv, got, lt.SessionCancelled)
}

// TestSteerCrash_SlowModelCall: the server is killed after a steer with
// interrupt of a session in a minute-long model call was answered and
// before it took effect (crashInWindow); the server started again makes
// the step's call with the message.
func TestSteerCrash_SlowModelCall(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--sandbox", "local") // no command runs: no sandbox to start
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	between := 0
	for round := 1; round <= cancelCrashRounds && between == 0; round++ {
		s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: steerCrashSpec(t), Input: "Think hard."})
		require.NoError(t, err)
		waitFor(t, cancelWithin, "the model call to start", func() (bool, error) {
			return len(eventsOf(ctx, t, srv.api, s.ID, lt.EventModelRequested)) > 0, nil
		})
		body, err := json.Marshal(lt.SteerRequest{Input: steerCrashMessage, Interrupt: true})
		require.NoError(t, err)
		_, dead, inside := crashKillAfter(t, srv, s.ID, "steer", string(body), lt.EventTurnSteered)

		call, evs := awaitSteeredCall(ctx, t, srv, s.ID)
		requireSteerCarried(ctx, t, srv, s.ID, call, evs)
		if inside {
			require.True(t, call.Time.After(dead), "killed before the steer's effect, yet its call was made before the kill:\n%s", describeJournal(evs))
			between++ // made by the server started again
		} else {
			t.Logf("round %d: the steer took effect before the kill; running another round", round)
		}
	}
	require.Positive(t, between, "in %d rounds no kill came between the steer's request and its effect", cancelCrashRounds)
}

// TestSteerCrash_AcrossNodes: two nodes share PostgreSQL; node a runs a
// session in a minute-long model call and is stopped (SIGSTOP) before node
// b takes a steer with interrupt, then killed and started again on its data
// directory: the step's call is made again with the message.
func TestSteerCrash_AcrossNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.FreshSchema(t), cancelCrashLeaseTTL)
	a := c.nodes[c.add()]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := a.api.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: steerCrashSpec(t), Input: "Think hard."})
	require.NoError(t, err)
	waitFor(t, cancelWithin, "the model call to start", func() (bool, error) {
		return len(eventsOf(ctx, t, a.api, s.ID, lt.EventModelRequested)) > 0, nil
	})
	b := c.nodes[c.add()] // started once node a holds the session
	crashStopped(ctx, t, a, b, s.ID, lt.EventTurnSteered, func() {
		_, err := b.api.Steer(ctx, s.ID, &lt.SteerRequest{Input: steerCrashMessage, Interrupt: true})
		require.NoError(t, err)
	})
	call, evs := awaitSteeredCall(ctx, t, b, s.ID)
	for _, ev := range evs {
		require.NotEqual(t, lt.EventModelFailed, ev.Type,
			"the stopped node never learned of the steer: its call was not journaled as abandoned:\n%s", describeJournal(evs))
	}
	requireSteerCarried(ctx, t, b, s.ID, call, evs)
}
