package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// newReportServer is newTestServer with the report service in the
// backend, as a node serves it.
func newReportServer(t *testing.T) *testServer {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(ctx, filepath.Join(dir, dbFile), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: filepath.Join(dir, workspacesDir),
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
		Logger:        log,
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	api := server.New(apptest.New(t, st, eng, nil), st, &server.Config{Logger: log})
	ts := httptest.NewServer(api)
	t.Cleanup(func() {
		api.Shutdown()
		ts.Close()
		stopCtx, cancel := context.WithTimeout(ctx, testTimeout)
		defer cancel()
		require.NoError(t, eng.Stop(stopCtx))
		require.NoError(t, st.Close())
	})
	cl, err := client.New(ts.URL, nil)
	require.NoError(t, err)
	return &testServer{url: ts.URL, client: cl, dbPath: st.Path()}
}

func TestReportCommand(t *testing.T) {
	// Not parallel with itself: it makes the command read pages of two.
	reportPage = 2
	s := newReportServer(t)
	ctx := context.Background()
	run := func(script string, tools ...lt.ToolSpec) string {
		t.Helper()
		sess, err := s.client.CreateSession(ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: json.RawMessage(script)},
				Instructions: "Work.", Tools: tools},
			Input: "work", Goal: "a goal, with a comma",
		})
		require.NoError(t, err)
		return sess.ID
	}
	accepted := run(`[{"text": "done", "cost_usd": 0.5}]`)
	s.waitEvent(t, accepted, lt.EventTurnCompleted)
	yes := true
	_, err := s.client.Review(ctx, accepted, &lt.ReviewRequest{Accepted: &yes, Note: "fine, \"really\""})
	require.NoError(t, err)

	asked := run(`[{"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which?"}}], "cost_usd": 0.25},
	               {"text": "ok", "cost_usd": 0.25}]`, lt.ToolSpec{Name: "ask_human"})
	ev := s.waitEvent(t, asked, lt.EventActionRequired)
	var req struct{ Action lt.Action }
	require.NoError(t, json.Unmarshal(ev.Data, &req))
	_, err = s.client.DecideAction(ctx, asked, req.Action.ID, &lt.Decision{Answer: "this one"})
	require.NoError(t, err)
	s.waitEvent(t, asked, lt.EventTurnCompleted)

	failed := run(`[{"error": {"status": 400}}]`)
	s.waitEvent(t, failed, lt.EventTurnFailed)

	// The table and the totals.
	out := cliOK(t, "report", "--server", s.url)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Regexp(t, `^Report of tasks created from \d{4}-\d\d-\d\d \d\d:\d\d to \d{4}-\d\d-\d\d \d\d:\d\d \(UTC\)$`, lines[0])
	require.Regexp(t, `^TASK +AGENT +STATUS +DURATION +EXTRA INPUT +ASKS +RETRIES +LAST CHECKPOINT +REVIEW +COST$`, lines[2])
	require.Regexp(t, `^`+failed+` +inline v1 +failed \(provider_error\) +\S+ +none +0 +0 +- +- +\$0\.0000$`, lines[3])
	require.Regexp(t, `^`+asked+` +inline v1 +idle +\S+ +asked +1 +0 +turn 1 +- +\$0\.5000$`, lines[4])
	require.Regexp(t, `^`+accepted+` +inline v1 +idle +\S+ +none +0 +0 +turn 1 +accepted +\$0\.5000$`, lines[5])
	for _, want := range []string{
		"Tasks:           3 (2 idle, 1 failed)",
		"Reviewed:        1: 1 accepted, 0 rejected; acceptance rate 100.0%",
		"No extra input:  2 of 3 (tasks that never had to ask a person for information)",
		"Human asks:      1 (0.33 per task)",
		"Retries:         0",
		"Cost:            $1.0000 in all; $1.0000 per accepted task",
	} {
		require.Contains(t, lines, want, out)
	}
	require.Regexp(t, regexp.MustCompile(`(?m)^DAY +TASKS +REVIEWED +ACCEPTED +COST\n\d{4}-\d\d-\d\d +3 +1 +1 +\$1\.0000$`), out)

	// --json: the API's report, every page merged.
	rep := cliJSON[lt.TaskReport](t, "report", "--server", s.url, "--json", "--since", "1h")
	require.Len(t, rep.Data, 3)
	require.Nil(t, rep.NextCursor)
	require.Equal(t, []string{failed, asked, accepted}, []string{rep.Data[0].ID, rep.Data[1].ID, rep.Data[2].ID})
	require.Equal(t, 3, rep.Totals.Tasks)
	require.Equal(t, 1.0, *rep.Totals.CostPerAcceptedTaskUSD)
	require.Equal(t, lt.BucketHour, rep.Bucket)

	// --csv: parsable, one row per task under the header.
	out = cliOK(t, "report", "--server", s.url, "--csv")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	require.Len(t, rows, 4)
	require.Equal(t, reportCSVHeader, rows[0])
	col := func(row []string, name string) string {
		for i, h := range reportCSVHeader {
			if h == name {
				return row[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	byID := map[string][]string{}
	for _, r := range rows[1:] {
		require.Len(t, r, len(reportCSVHeader))
		byID[col(r, "id")] = r
	}
	require.Equal(t, "true", col(byID[accepted], "accepted"))
	require.Equal(t, `fine, "really"`, col(byID[accepted], "review_note"))
	require.Equal(t, "a goal, with a comma", col(byID[accepted], "goal"))
	require.Equal(t, "0.5", col(byID[accepted], "cost_usd"))
	require.Equal(t, "true", col(byID[accepted], "tokens_estimated"), "the scripted step gave no usage")
	require.Equal(t, "false", col(byID[failed], "tokens_estimated"), "a failed call counts no tokens")
	require.Equal(t, "true", col(byID[accepted], "input_complete"))
	require.Equal(t, "false", col(byID[asked], "input_complete"))
	require.Equal(t, "1", col(byID[asked], "inputs"))
	require.Equal(t, "1", col(byID[asked], "asks"))
	require.Equal(t, "", col(byID[asked], "accepted"), "not reviewed")
	require.Equal(t, "turn", col(byID[asked], "last_checkpoint_kind"))
	require.Equal(t, "failed", col(byID[failed], "status"))
	require.Equal(t, "provider_error", col(byID[failed], "stop_reason"))
	require.Equal(t, "", col(byID[failed], "last_checkpoint_id"))
	for _, r := range rows[1:] {
		created, err := time.Parse(time.RFC3339Nano, col(r, "created_at"))
		require.NoError(t, err)
		ended, err := time.Parse(time.RFC3339Nano, col(r, "ended_at"))
		require.NoError(t, err)
		require.False(t, ended.Before(created))
	}

	// An empty window, and refusals.
	out = cliOK(t, "report", "--server", s.url, "--agent", "nobody")
	require.Contains(t, out, "Report of tasks of agent nobody created from")
	require.Contains(t, out, "No tasks in this window.")
	r := cliRun(t, "report", "--server", s.url, "--json", "--csv")
	require.Equal(t, exitUsage, r.code, r.stderr)
	r = cliRun(t, "report", "--server", s.url, "--bucket", "minute")
	require.Equal(t, exitUsage, r.code, r.stderr)
	r = cliRun(t, "report", "--server", s.url, "--since", "yesterday")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   since")
}

// TestServeMetricsAndReports: a node serves GET /metrics behind its API
// keys (or to anyone with --metrics-public), counting what its engine
// does, and GET /v1/reports/tasks.
func TestServeMetricsAndReports(t *testing.T) {
	t.Parallel()
	get := func(url, key string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}

	n := startServe(t, noEnv, "--data", t.TempDir(), "--api-key", "k1", "--sandbox", "local")
	status, _ := get(n.url+"/metrics", "")
	require.Equal(t, http.StatusUnauthorized, status)

	cl, err := client.New(n.url, &client.Config{APIKey: "k1"})
	require.NoError(t, err)
	_, err = cl.CreateSession(context.Background(), &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Name: "demo",
			Script: json.RawMessage(`[{"text": "done", "cost_usd": 0.25}]`)}, Instructions: "Work."},
		Input: "work",
	})
	require.NoError(t, err)
	// The session is idle once its turn is stored, which can come before
	// the metrics' decorator has counted the step that made it: poll the
	// scrape until every figure is there, or the deadline passes.
	want := []string{
		"longhaul_steps_total 1\n", // the engine writes through the metrics' decorator
		`longhaul_model_cost_usd_total{model="demo",provider="scripted"} 0.25`,
		`longhaul_sessions{status="idle"} 1`,
	}
	deadline := time.Now().Add(testTimeout)
	for {
		status, body := get(n.url+"/metrics", "k1")
		require.Equal(t, http.StatusOK, status)
		missing := slices.IndexFunc(want, func(w string) bool { return !strings.Contains(body, w) })
		if missing < 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "metrics never showed %q; last scrape:\n%s", want[missing], body)
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for an event
	}

	rep := cliJSON[lt.TaskReport](t, "report", "--server", n.url, "--api-key", "k1", "--json")
	require.Equal(t, 1, rep.Totals.Tasks)
	require.Equal(t, 0.25, rep.Totals.CostUSD)
	require.NoError(t, n.stop())

	public := startServe(t, noEnv, "--data", t.TempDir(), "--api-key", "k1", "--sandbox", "local", "--metrics-public")
	status, body := get(public.url+"/metrics", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "# TYPE longhaul_sessions gauge")
	status, _ = get(public.url+"/v1/sessions", "")
	require.Equal(t, http.StatusUnauthorized, status, "only /metrics is public")
	require.NoError(t, public.stop())
}
