package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestMonitorReviewedSummary: "longhaul events" shows a model monitor's
// verdict, what it reviewed and why, never the prompt.
func TestMonitorReviewedSummary(t *testing.T) {
	data, err := json.Marshal(lt.MonitorReviewedData{Trigger: lt.ReviewBefore, Step: 3, CallID: "call_3_0", Tool: "shell",
		Verdict: lt.VerdictPause, Reasons: []string{"it read credentials", "then copies them"}, Prompt: "the long summary", CostUSD: 0.125})
	require.NoError(t, err)
	got := eventSummary(lt.Event{Type: lt.EventMonitorReviewed, Data: data})
	require.Equal(t, "pause (before shell call_3_0): it read credentials; then copies them; $0.1250", got)

	data, err = json.Marshal(lt.MonitorReviewedData{Trigger: lt.ReviewEverySteps, Step: 4, Verdict: lt.VerdictPause, Failed: true, Reasons: []string{"failed closed: no JSON"}})
	require.NoError(t, err)
	got = eventSummary(lt.Event{Type: lt.EventMonitorReviewed, Data: data})
	require.Equal(t, "pause (step 4, failed closed): failed closed: no JSON", got)
}

// TestMonitorHeldSummary: "longhaul events" says which action holds the
// sub-agents.
func TestMonitorHeldSummary(t *testing.T) {
	data, err := json.Marshal(lt.MonitorHeldData{ActionID: "act_5e0c"})
	require.NoError(t, err)
	require.Equal(t, "sub-agents paused with this session until act_5e0c is decided", eventSummary(lt.Event{Type: lt.EventMonitorHeld, Data: data}))
}
