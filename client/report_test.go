package client

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestTaskReport(t *testing.T) {
	t.Parallel()
	since := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	rate := 0.5
	want := &lt.TaskReport{
		Since: since, Until: since.Add(48 * time.Hour), Bucket: lt.BucketHour, IncludeSubagents: true,
		Totals: lt.TaskTotals{Tasks: 2, Reviewed: 2, Accepted: 1, Rejected: 1, AcceptanceRate: &rate,
			ByStatus: map[lt.SessionStatus]int{lt.SessionIdle: 2}},
		Series: []lt.TaskBucket{{Start: since, Tasks: 2, Reviewed: 2, Accepted: 1, CostUSD: 0.75}},
		Data:   []lt.TaskRecord{{ID: "ses_1", Status: lt.SessionIdle, AsksByType: map[lt.ActionType]int{lt.ActionInput: 1}, Asks: 1}},
	}
	// The handler records the request; the test checks it after the call
	// (require must not stop the test from the server's goroutine).
	var gotQuery, gotRequest string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotRequest = r.Method + " " + r.URL.Path
		gotQuery = r.URL.Query().Encode()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(want)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, &Config{HTTPClient: ownTransport(t)})
	require.NoError(t, err)

	got, err := c.TaskReport(t.Context(), lt.TaskReportParams{Since: "2d", Until: "2025-03-03T00:00:00Z", Agent: "writer", Project: "support",
		IncludeSubagents: true, Bucket: lt.BucketHour, Cursor: "ses_9", Limit: 20})
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, "GET /v1/reports/tasks", gotRequest)
	require.Equal(t, "agent=writer&bucket=hour&cursor=ses_9&include_subagents=true&limit=20&project=support&since=2d&until=2025-03-03T00%3A00%3A00Z", gotQuery)

	_, err = c.TaskReport(t.Context(), lt.TaskReportParams{})
	require.NoError(t, err)
	require.Empty(t, gotQuery, "defaults are the server's")

	_, err = c.TaskReport(t.Context(), lt.TaskReportParams{Limit: 501})
	require.EqualError(t, err, "task report: TaskReportParams.Limit 501 is outside 0..500")
}
