package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "36h": 36 * time.Hour,
		"90m": 90 * time.Minute, "1h30m": 90 * time.Minute,
	} {
		got, ok := parseDuration(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "0d", "-1h", "d", "7 d", "1.5d", "123456d", "yesterday"} {
		_, ok := parseDuration(in)
		require.False(t, ok, in)
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 6, 10, 9, 30, 0, 0, time.UTC)

	w, err := newWindow(lt.TaskReportParams{}, now)
	require.NoError(t, err)
	require.Equal(t, now.Add(-7*24*time.Hour), w.since)
	require.Equal(t, now, w.until)
	require.Equal(t, lt.BucketDay, w.bucket)
	require.Equal(t, time.Date(2030, 6, 3, 0, 0, 0, 0, time.UTC), w.seriesStart)
	require.Equal(t, 8, w.buckets, "7 days from 09:30 touch 8 days")
	require.Equal(t, defaultLimit, w.limit)

	w, err = newWindow(lt.TaskReportParams{Since: "48h", Until: "2030-06-10T00:00:00+02:00"}, now)
	require.NoError(t, err)
	require.Equal(t, time.Date(2030, 6, 9, 22, 0, 0, 0, time.UTC), w.until, "times are kept in UTC")
	require.Equal(t, time.Date(2030, 6, 7, 22, 0, 0, 0, time.UTC), w.since, "since is measured back from until")
	require.Equal(t, lt.BucketHour, w.bucket, "48 hours are charted by hour")
	require.Equal(t, 48, w.buckets)
	require.Equal(t, 0, w.bucketOf(w.since))
	require.Equal(t, 47, w.bucketOf(w.until.Add(-time.Nanosecond)))
	require.Equal(t, 47, w.bucketOf(w.until.Add(time.Hour)), "out of range clamps")

	w, err = newWindow(lt.TaskReportParams{Since: "49h", Bucket: lt.BucketHour}, now)
	require.NoError(t, err)
	require.Equal(t, 50, w.buckets, "49 hours from half past touch 50 hours")

	for _, tc := range []struct {
		p     lt.TaskReportParams
		field string
	}{
		{lt.TaskReportParams{Since: "1900-01-01T00:00:00Z"}, "since"},
		{lt.TaskReportParams{Until: "1d", Since: "2030-06-10T00:00:00Z"}, "since"},
		{lt.TaskReportParams{Bucket: "week"}, "bucket"},
		{lt.TaskReportParams{Since: "84d", Bucket: lt.BucketHour}, "bucket"},
		{lt.TaskReportParams{Limit: -1}, "limit"},
		{lt.TaskReportParams{Limit: 501}, "limit"},
	} {
		_, err := newWindow(tc.p, now)
		var ae *apierror.Error
		require.True(t, errors.As(err, &ae), "%+v: %v", tc.p, err)
		require.Equal(t, tc.field, ae.Field, "%+v: %v", tc.p, err)
	}
}

// TestProjectionFollowsState holds the report's partial decoding to the
// JSON names of journal.State: every field it reads survives a round trip
// through a stored State.
func TestProjectionFollowsState(t *testing.T) {
	t.Parallel()
	parent := "ses_parent"
	ended := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	st := journal.State{
		Session: lt.Session{ID: "ses_1", Status: lt.SessionIdle, Goal: "g", ParentID: &parent,
			Usage: lt.Usage{CostUSD: 2, ModelCalls: 3}, CreatedAt: ended.Add(-time.Hour)},
		TurnCount: 4,
		Children:  []journal.Child{{ID: "ses_c", Usage: lt.Usage{CostUSD: 0.5}}},
		Tally: journal.Tally{Asks: map[lt.ActionType]int{lt.ActionBudget: 2}, Retries: 1, EndedAt: &ended,
			Checkpoint: &journal.CheckpointBrief{ID: "ckpt_1", Name: "n", Kind: lt.CheckpointNamed}, Inherited: &lt.Usage{CostUSD: 1}},
	}
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	var p projection
	require.NoError(t, json.Unmarshal(raw, &p))
	require.Equal(t, st.Session.Usage, p.Session.Usage)
	require.Equal(t, st.TurnCount, p.TurnCount)
	require.Equal(t, st.Children, p.Children)
	require.Equal(t, st.Tally, p.Tally)

	task, err := newTask(&store.SessionRow{ID: "ses_1", Status: "idle", State: raw, CreatedAt: st.Session.CreatedAt}, ended)
	require.NoError(t, err)
	require.Equal(t, 1.0, task.rec.CostUSD, "a fork's inherited cost is left out")
	require.Equal(t, 0.5, task.rec.ModelCostUSD)
	require.Equal(t, 0.5, task.rec.SubagentCostUSD)
	require.Equal(t, 2, task.rec.Asks)
	require.True(t, task.rec.InputComplete)
	require.Equal(t, 3600.0, task.rec.DurationSeconds)
	require.Equal(t, lt.Usage{CostUSD: 0.5, ModelCalls: 3}, task.own)
}

// TestTaskWithoutTally: a session projected before the tally existed
// still reports, from what its projection has.
func TestTaskWithoutTally(t *testing.T) {
	t.Parallel()
	created := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	ckpt := "ckpt_old"
	raw, err := json.Marshal(journal.State{Session: lt.Session{ID: "ses_old", Status: lt.SessionFailed,
		LastCheckpoint: &ckpt, CreatedAt: created, UpdatedAt: created.Add(90 * time.Second)}})
	require.NoError(t, err)
	task, err := newTask(&store.SessionRow{ID: "ses_old", AgentName: "a", AgentVersion: 2, State: raw, CreatedAt: created}, created.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 90.0, task.rec.DurationSeconds, "ended at its last update")
	require.Equal(t, &lt.TaskCheckpoint{ID: ckpt}, task.rec.LastCheckpoint)
	require.Equal(t, lt.AgentRef{Name: "a", Version: 2}, task.rec.Agent, "the row names the agent")
	require.Equal(t, map[lt.ActionType]int{}, task.rec.AsksByType)

	_, err = newTask(&store.SessionRow{ID: "ses_bad", State: json.RawMessage(`{"session": 5}`)}, created)
	require.ErrorContains(t, err, "ses_bad")
}

// TestMaxTasks: a window holding more sessions than the service reads is
// refused, naming since; the bound is checked against the sessions of the
// window only.
func TestMaxTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openTestStore(t)
	base := time.Date(2030, 6, 10, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		created := base.Add(time.Duration(i) * time.Hour)
		raw, err := json.Marshal(journal.State{Session: lt.Session{Status: lt.SessionIdle, CreatedAt: created}})
		require.NoError(t, err)
		_, err = st.SessionCreate(ctx, &store.SessionCreateParams{Session: store.SessionRow{
			ID: fmt.Sprintf("ses_%d", i), AgentName: "a", AgentVersion: 1, Status: "idle", State: raw, CreatedAt: created,
		}})
		require.NoError(t, err)
	}
	svc := New(st, &Config{MaxTasks: 2, Now: func() time.Time { return base.Add(24 * time.Hour) }})
	_, err := svc.TaskReport(ctx, lt.TaskReportParams{Since: "2d"})
	var ae *apierror.Error
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, "since", ae.Field)
	require.Contains(t, ae.Message, "more than 2 tasks")

	rep, err := svc.TaskReport(ctx, lt.TaskReportParams{Since: "2030-06-10T01:00:00Z"})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Totals.Tasks)
	require.Equal(t, []string{"ses_2", "ses_1"}, []string{rep.Data[0].ID, rep.Data[1].ID})
}

// openTestStore opens a migrated SQLite store in t.TempDir().
func openTestStore(t *testing.T) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}
