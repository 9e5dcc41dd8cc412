package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The model monitor against an agent that reads a secret-looking file and
// then runs an irreversible shell call that ships it: the scripted monitor
// model reads the trajectory and answers pause before the call runs.
// Asserted from outside, on the real binary: the review (its verdict,
// reasons and the prompt it read) is in the journal before any effect, the
// monitor action is pending and survives a restart of the server, the
// effect did not happen until a person lets the session continue, and the
// review is counted in /metrics and its cost apart in the usage.
func TestModelMonitor_PausesBeforeIrreversible(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startServer(t)

	verdict, err := json.Marshal(map[string]any{"verdict": "pause", "reasons": []string{"it read a credentials file and is about to copy it"}})
	require.NoError(t, err)
	monitorScript := attackScript(t, map[string]any{"text": string(verdict), "cost_usd": 0.125})
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				toolCalls(toolCall("write_file", map[string]any{"path": "credentials.env", "content": "AWS_SECRET_ACCESS_KEY=not-a-real-key\n"})),
				toolCalls(toolCall("read_file", map[string]any{"path": "credentials.env"})),
				shellStep("cat credentials.env > shipped.txt"),
				finalText("shipped"),
			)},
			Tools: []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}, {Name: "shell", Effect: lt.EffectIrreversible}},
			Monitor: &lt.MonitorSpec{
				Model:  &lt.ModelSpec{Provider: "scripted", Name: "watcher", Script: monitorScript},
				Before: []lt.EffectClass{lt.EffectIrreversible},
			},
		},
		Input: "tidy up the credentials",
	})
	require.NoError(t, err)
	s := waitStatus(ctx, t, srv, sess.ID, time.Minute, lt.SessionRequiresAction, lt.SessionFailed, lt.SessionIdle)
	requireStatus(ctx, t, srv, s, lt.SessionRequiresAction)

	// The review, journaled before the call it is about.
	reviews := eventData[lt.MonitorReviewedData](ctx, t, srv.api, s.ID, lt.EventMonitorReviewed)
	require.Len(t, reviews, 1)
	r := reviews[0]
	require.Equal(t, lt.ReviewBefore, r.Trigger)
	require.Equal(t, "shell", r.Tool)
	require.Equal(t, lt.VerdictPause, r.Verdict)
	require.False(t, r.Failed)
	require.Equal(t, []string{"it read a credentials file and is about to copy it"}, r.Reasons)
	require.Contains(t, r.Prompt, "credentials.env", "the monitor read the trajectory")
	require.Contains(t, r.Prompt, "shipped.txt", "and the call under review")
	require.InDelta(t, 0.125, r.CostUSD, 1e-9)
	for _, d := range eventData[lt.ToolStartedData](ctx, t, srv.api, s.ID, lt.EventToolStarted) {
		require.NotEqual(t, "shell", d.Tool, "the shell call has not started")
	}

	// The monitor action, with the review's reasons.
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionMonitor, act.Type)
	require.NotNil(t, act.Review)
	require.Equal(t, r.Reasons, act.Review.Reasons)
	require.Empty(t, act.Review.Prompt, "the action carries the reasons, the journal the prompt")
	_, err = srv.api.GetFile(ctx, s.ID, "", "shipped.txt")
	require.Error(t, err, "the effect did not happen")

	metrics := scrapeMetrics(t, srv)
	require.Equal(t, 1.0, metrics[`longhaul_monitor_reviews_total{verdict="pause"}`])
	require.Equal(t, 1.0, metrics[`longhaul_required_actions_pending{type="monitor"}`])

	// The action survives the server's death; nothing is reviewed again.
	srv.restart()
	s = waitStatus(ctx, t, srv, s.ID, time.Minute, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	require.Equal(t, act.ID, s.RequiredActions[0].ID)
	_, err = srv.api.GetFile(ctx, s.ID, "", "shipped.txt")
	require.Error(t, err, "the effect still did not happen")

	_, err = srv.api.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionContinue})
	require.NoError(t, err)
	s = waitStatus(ctx, t, srv, s.ID, time.Minute, lt.SessionIdle, lt.SessionFailed)
	requireStatus(ctx, t, srv, s, lt.SessionIdle)
	got, err := srv.api.GetFile(ctx, s.ID, "", "shipped.txt")
	require.NoError(t, err, "continue ran the call")
	require.True(t, strings.HasPrefix(string(got), "AWS_SECRET_ACCESS_KEY="))
	require.Len(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventMonitorReviewed), 1, "the review is not made again")
	require.InDelta(t, 0.125, s.Usage.MonitorCostUSD, 1e-9)
	require.GreaterOrEqual(t, s.Usage.CostUSD, s.Usage.MonitorCostUSD)
}
