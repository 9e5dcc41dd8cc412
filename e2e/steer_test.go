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

// steerWithin is how long a steer with interrupt may take to abandon a
// model call on another node: far less than the 20 s the call would take.
const steerWithin = 5 * time.Second

// The journal's data of the events the steer test reads, as the API shows
// them.
type (
	steeredData struct {
		TurnID    string `json:"turn_id"`
		Input     string `json:"input"`
		Interrupt bool   `json:"interrupt"`
	}
	modelRequestedData struct {
		Step          int `json:"step"`
		Attempt       int `json:"attempt"`
		ContextTokens int `json:"context_tokens"`
		Steers        int `json:"steers"`
	}
	modelFailedData struct {
		Interrupted string    `json:"interrupted"`
		Usage       *lt.Usage `json:"usage"`
	}
)

// TestSteer_FromAnotherNode: two nodes share PostgreSQL; `longhaul steer
// --interrupt`, sent to the node that does not run the session, reaches
// the one that does (the store's notifier): its 20 s model call is
// abandoned within seconds and counted, and the call made again carries
// the message (the journal says so, and its context grew by it); the
// turn then ends with that call's answer.
func TestSteer_FromAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.FreshSchema(t), multiLeaseTTL)
	a := c.nodes[c.add()]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := a.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
			map[string]any{"delay_ms": 20000, "text": "too late"}, finalText("the short answer"))}},
		Input: "Think hard.",
	})
	require.NoError(t, err)
	waitFor(t, steerWithin, "the model call to start", func() (bool, error) {
		return len(eventsOf(ctx, t, a.api, s.ID, lt.EventModelRequested)) > 0, nil
	})
	b := c.nodes[c.add()] // started once node a holds the session
	const msg = "Stop thinking and answer in one line, with the figures from the 2025 report rather than the older ones."
	start := time.Now()
	out, err := exec.CommandContext(ctx, longhaulBin, "steer", s.ID, msg, "--interrupt", "--server", b.url).CombinedOutput()
	require.NoError(t, err, "longhaul steer: %s", out)
	require.Contains(t, string(out), "Steered "+s.ID)

	waitFor(t, steerWithin, "the call in flight to be abandoned", func() (bool, error) {
		return len(eventsOf(ctx, t, b.api, s.ID, lt.EventModelFailed)) > 0, nil
	})
	require.Less(t, time.Since(start), steerWithin)
	got := waitStatus(ctx, t, b, s.ID, steerWithin, lt.SessionIdle)

	steered := eventData[steeredData](ctx, t, b.api, s.ID, lt.EventTurnSteered)
	require.Equal(t, []steeredData{{TurnID: s.CurrentTurnID, Input: msg, Interrupt: true}}, steered)
	failed := eventData[modelFailedData](ctx, t, b.api, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "steered", failed[0].Interrupted)
	require.NotNil(t, failed[0].Usage)
	require.Positive(t, failed[0].Usage.InputTokens, "the abandoned call counts what it was sent")
	requested := eventData[modelRequestedData](ctx, t, b.api, s.ID, lt.EventModelRequested)
	require.Len(t, requested, 2)
	require.Equal(t, 0, requested[0].Steers)
	require.Equal(t, modelRequestedData{Step: 1, Attempt: 1, ContextTokens: requested[1].ContextTokens, Steers: 1}, requested[1],
		"the same step, made again carrying the message")
	require.Greater(t, requested[1].ContextTokens, requested[0].ContextTokens+10, "the context grew by the message")
	require.Equal(t, int64(2), got.Usage.ModelCalls)

	turns, err := b.api.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, turns.Data, 1)
	require.Equal(t, "the short answer", turns.Data[0].Output)

	// No turn runs now: a steer is refused, saying what to do instead.
	out, err = exec.CommandContext(ctx, longhaulBin, "steer", s.ID, "more", "--server", a.url).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "send a follow-up turn instead")
}
