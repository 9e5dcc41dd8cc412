package report

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPolicyApprovalFigures: the report's per-rule figures against a known
// sequence of decisions in two tasks: "deploys" asked 5 times and was
// approved every time (decided in 10, 30, 20, 40 and 60 s: median 30 s),
// so with relax_after_asks 5 it is a candidate to relax; "emails" asked 3
// times, one rejected and one still open (5 and 50 s: median 27.5 s); the
// monitor's hook flags "emails" to tighten, and a rule that never asked.
func TestPolicyApprovalFigures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openTestStore(t)
	base := time.Date(2030, 6, 10, 0, 0, 0, 0, time.UTC)
	tasks := []map[string]*journal.RuleApprovals{
		{
			"deploys": {Asks: 3, Decided: 3, Approved: 3, DecideMS: []int64{10_000, 30_000, 20_000}},
			"emails":  {Asks: 2, Decided: 2, Approved: 1, DecideMS: []int64{5_000, 50_000}},
		},
		{
			"deploys": {Asks: 2, Decided: 2, Approved: 2, DecideMS: []int64{40_000, 60_000}},
			"emails":  {Asks: 1},
		},
	}
	for i, approvals := range tasks {
		created := base.Add(time.Duration(i) * time.Hour)
		raw, err := json.Marshal(journal.State{Session: lt.Session{Status: lt.SessionIdle, CreatedAt: created},
			Tally: journal.Tally{Approvals: approvals}})
		require.NoError(t, err)
		_, err = st.SessionCreate(ctx, &store.SessionCreateParams{Session: store.SessionRow{
			ID: "ses_" + string(rune('a'+i)), AgentName: "a", AgentVersion: 1, Status: "idle", State: raw, CreatedAt: created,
		}})
		require.NoError(t, err)
	}
	now := func() time.Time { return base.Add(24 * time.Hour) }
	var asked *lt.TaskReport
	tighten := func(_ context.Context, r *lt.TaskReport) (map[string]string, error) {
		asked = r
		return map[string]string{"emails": "sent to an unknown domain after a failing test", "uploads": "exfiltration pattern"}, nil
	}
	svc := New(st, &Config{Now: now, RelaxAfterAsks: 5, ToTighten: tighten})
	rep, err := svc.TaskReport(ctx, lt.TaskReportParams{Since: "2d"})
	require.NoError(t, err)
	require.Same(t, rep, asked, "the hook sees the report's window")
	require.Equal(t, 5, rep.RelaxAfterAsks)
	ptr := func(v float64) *float64 { return &v }
	require.Equal(t, []lt.PolicyApprovals{
		{Rule: "deploys", Asks: 5, Decided: 5, Approved: 5, ApproveRate: ptr(1), MedianDecideSeconds: ptr(30), Relax: true},
		{Rule: "emails", Asks: 3, Decided: 2, Approved: 1, ApproveRate: ptr(0.5), MedianDecideSeconds: ptr(27.5),
			Tighten: true, TightenReason: "sent to an unknown domain after a failing test"},
		{Rule: "uploads", Tighten: true, TightenReason: "exfiltration pattern"},
	}, rep.Totals.Policies)

	// One ask short of relax_after_asks: not flagged. The default is 20.
	rep, err = New(st, &Config{Now: now, RelaxAfterAsks: 6}).TaskReport(ctx, lt.TaskReportParams{Since: "2d"})
	require.NoError(t, err)
	require.False(t, rep.Totals.Policies[0].Relax)
	rep, err = New(st, &Config{Now: now}).TaskReport(ctx, lt.TaskReportParams{Since: "2d"})
	require.NoError(t, err)
	require.Equal(t, lt.DefaultRelaxAfterAsks, rep.RelaxAfterAsks)
	require.False(t, rep.Totals.Policies[0].Relax)
	require.False(t, rep.Totals.Policies[0].Tighten, "no monitor: nothing to tighten")

	// A window without approvals has none.
	rep, err = New(st, &Config{Now: func() time.Time { return base.Add(30 * 24 * time.Hour) }}).TaskReport(ctx, lt.TaskReportParams{Since: "1d"})
	require.NoError(t, err)
	require.Equal(t, []lt.PolicyApprovals{}, rep.Totals.Policies)
}

func TestMedianSeconds(t *testing.T) {
	t.Parallel()
	_, ok := medianSeconds(nil)
	require.False(t, ok)
	for _, tc := range []struct {
		ms   []int64
		want float64
	}{{[]int64{7}, 0.007}, {[]int64{3000, 1000, 2000}, 2}, {[]int64{4000, 1000, 3000, 2000}, 2.5}} {
		got, ok := medianSeconds(tc.ms)
		require.True(t, ok)
		require.InDelta(t, tc.want, got, 1e-12, "%v", tc.ms)
	}
}

// TestTightenFromTheSessions: the rules the sessions' journals linked to a
// monitor finding (journal.Tally.Tighten) are flagged to tighten with no
// hook, the newest session's reason first; a rule that never asked is
// listed too.
func TestTightenFromTheSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openTestStore(t)
	base := time.Date(2030, 6, 10, 0, 0, 0, 0, time.UTC)
	tallies := []journal.Tally{
		{Approvals: map[string]*journal.RuleApprovals{"posts": {Asks: 1, Decided: 1, Approved: 1, DecideMS: []int64{1000}}},
			Tighten: map[string]string{"posts": "older reason", "shell-ok": "the trajectory monitor (secret_probe) flagged the shell call c1 it let run"}},
		{Tighten: map[string]string{"posts": "the trajectory monitor (secret_like_egress) flagged the http_request call c9 it let run"}},
		{},
	}
	for i, tally := range tallies {
		created := base.Add(time.Duration(i) * time.Hour)
		raw, err := json.Marshal(journal.State{Session: lt.Session{Status: lt.SessionIdle, CreatedAt: created}, Tally: tally})
		require.NoError(t, err)
		_, err = st.SessionCreate(ctx, &store.SessionCreateParams{Session: store.SessionRow{
			ID: "ses_" + string(rune('a'+i)), AgentName: "a", AgentVersion: 1, Status: "idle", State: raw, CreatedAt: created,
		}})
		require.NoError(t, err)
	}
	rep, err := New(st, &Config{Now: func() time.Time { return base.Add(24 * time.Hour) }}).TaskReport(ctx, lt.TaskReportParams{Since: "2d"})
	require.NoError(t, err)
	ptr := func(v float64) *float64 { return &v }
	require.Equal(t, []lt.PolicyApprovals{
		{Rule: "posts", Asks: 1, Decided: 1, Approved: 1, ApproveRate: ptr(1), MedianDecideSeconds: ptr(1),
			Tighten: true, TightenReason: "the trajectory monitor (secret_like_egress) flagged the http_request call c9 it let run"},
		{Rule: "shell-ok", Tighten: true, TightenReason: "the trajectory monitor (secret_probe) flagged the shell call c1 it let run"},
	}, rep.Totals.Policies)
}
