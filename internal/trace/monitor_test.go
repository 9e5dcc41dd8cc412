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
