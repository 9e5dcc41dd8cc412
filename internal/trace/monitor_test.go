package trace_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestBuildMonitorFindings: a finding is shown on the call its evidence
// belongs to; one whose evidence is no call's, on its step.
func TestBuildMonitorFindings(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0, "shell").
		toolRequested(0, "turn_a", 1, 0, "shell", lt.EffectIdempotent)
	probe := int64(len(j.evs))
	j.add(0, lt.EventMonitorFinding, "turn_a", 1, lt.MonitorFindingData{Detector: "secret_probe", Severity: "high", Summary: "a shell call reads a process's environment (/proc/*/environ)", Evidence: []int64{probe}, Action: "log"}).
		add(0, lt.EventMonitorFinding, "turn_a", 1, lt.MonitorFindingData{Detector: "repeated_failure", Severity: "low", Summary: "elsewhere", Evidence: []int64{1}, Action: "log"}).
		add(ms(1), lt.EventToolCompleted, "turn_a", 1, lt.ToolCompletedData{Step: 1, Index: 0, CallID: "call_1_0", Tool: "shell"}).
		requested(0, "turn_a", 2, 1, "").
		responded(ms(10), "turn_a", 2, 10, 5, 0).
		completed(0, "turn_a")
	tr := j.build(nil)
	call := find(t, tr.Spans, "turn_a/step/1/call/0")
	require.Equal(t, []string{"secret_probe (high, log): a shell call reads a process's environment (/proc/*/environ)"}, call.Attributes.Findings)
	step := find(t, tr.Spans, "turn_a/step/1")
	require.Equal(t, []string{"repeated_failure (low, log): elsewhere"}, step.Attributes.Findings)
}

// TestBuildMonitorReviews: the model monitor's call is a model span of
// purpose monitor with its cost; its verdict is shown on the call it
// reviewed, and a periodic review's on its step.
func TestBuildMonitorReviews(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0, "shell").
		toolRequested(0, "turn_a", 1, 0, "shell", lt.EffectIrreversible).
		requested(0, "turn_a", 1, 1, lt.PurposeMonitor)
	j.add(ms(5), lt.EventMonitorReviewed, "turn_a", 1, lt.MonitorReviewedData{Trigger: lt.ReviewBefore, Step: 1, CallID: "call_1_0", Tool: "shell",
		Verdict: lt.VerdictPause, Reasons: []string{"exfiltration"}, Provider: "scripted", Usage: lt.Usage{InputTokens: 7, ModelCalls: 1}, CostUSD: 0.5}).
		add(0, lt.EventMonitorReviewed, "turn_a", 1, lt.MonitorReviewedData{Trigger: lt.ReviewEverySteps, Step: 1, Verdict: lt.VerdictPause, Failed: true,
			Reasons: []string{"failed closed: no provider"}, Provider: "scripted"}).
		add(ms(1), lt.EventToolCompleted, "turn_a", 1, lt.ToolCompletedData{Step: 1, Index: 0, CallID: "call_1_0", Tool: "shell"}).
		requested(0, "turn_a", 2, 1, "").
		responded(ms(10), "turn_a", 2, 10, 5, 0).
		completed(0, "turn_a")
	tr := j.build(nil)
	call := find(t, tr.Spans, "turn_a/step/1/call/0")
	require.Equal(t, []string{"model monitor (before): pause: exfiltration"}, call.Attributes.Findings)
	step := find(t, tr.Spans, "turn_a/step/1")
	require.Equal(t, []string{"model monitor (every_steps): pause (failed closed): failed closed: no provider"}, step.Attributes.Findings)
	var monitorSpans int
	var walk func([]lt.Span)
	walk = func(ss []lt.Span) {
		for _, s := range ss {
			if s.Kind == lt.SpanModelCall && s.Attributes.Purpose == lt.PurposeMonitor {
				monitorSpans++
				require.Equal(t, lt.SpanOK, s.Status)
				require.InDelta(t, 0.5, s.Usage.CostUSD, 1e-9)
			}
			walk(s.Children)
		}
	}
	walk(tr.Spans)
	require.Equal(t, 1, monitorSpans, "the failed-closed review made no call")
}
