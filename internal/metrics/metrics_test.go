package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/metrics"
	lhmodel "github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// clock is the system clock moved by a settable offset.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().UTC().Add(c.offset)
}

func (c *clock) After(d time.Duration) <-chan time.Time { return time.After(d) }

const apiKey = "metrics-test-key"

// stack is a node as cmd wires it: the engine writes through the metrics'
// store decorator, the server serves the metrics behind the API key.
type stack struct {
	t       *testing.T
	m       *metrics.Metrics
	api     *httptest.Server // /metrics behind the key
	public  *httptest.Server // the same, with MetricsPublic
	clock   *clock
	metricN func() time.Time
}

func newStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	clk := &clock{}
	// The scrape sees the actions ten minutes after the engine made them.
	metricsNow := func() time.Time { return clk.Now().Add(10 * time.Minute) }
	m := metrics.New(st, &metrics.Config{Now: metricsNow, Logger: slog.New(slog.DiscardHandler)})
	eng, err := engine.New(m.Wrap(st), &engine.Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"),
		Providers:     map[string]lhmodel.Provider{"scripted": scripted.New(nil)},
		Logger:        slog.New(slog.DiscardHandler),
		PollInterval:  20 * time.Millisecond,
		Clock:         clk,
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, eng.Stop(stopCtx))
	})
	s := &stack{t: t, m: m, clock: clk, metricN: metricsNow}
	for _, public := range []bool{false, true} {
		srv := server.New(apptest.New(t, st, eng, nil), st, &server.Config{APIKeys: []string{apiKey}, Logger: slog.New(slog.DiscardHandler),
			Metrics: m.Handler(), MetricsPublic: public})
		ts := httptest.NewServer(srv)
		t.Cleanup(func() {
			srv.Shutdown()
			ts.Close()
		})
		if public {
			s.public = ts
		} else {
			s.api = ts
		}
	}
	return s
}

func (s *stack) do(method, path string, body any, key string) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(s.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.api.URL+path, rd)
	require.NoError(s.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := s.api.Client().Do(req)
	require.NoError(s.t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(s.t, err)
	return res.StatusCode, data
}

func call[T any](s *stack, method, path string, body any, want int) T {
	s.t.Helper()
	status, data := s.do(method, path, body, apiKey)
	require.Equal(s.t, want, status, "%s %s: %s", method, path, data)
	var v T
	require.NoError(s.t, json.Unmarshal(data, &v), "body: %s", data)
	return v
}

func (s *stack) waitStatus(id string, want lt.SessionStatus) lt.Session {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sess := call[lt.Session](s, http.MethodGet, "/v1/sessions/"+id, nil, http.StatusOK)
		if sess.Status == want {
			return sess
		}
		require.False(s.t, sess.Status.Terminal() && sess.Status != want, "session %s ended %s, want %s", id, sess.Status, want)
		require.True(s.t, time.Now().Before(deadline), "session %s still %s, want %s", id, sess.Status, want)
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an event
	}
}

func (s *stack) start(steps ...any) string {
	s.t.Helper()
	script, err := json.Marshal(steps)
	require.NoError(s.t, err)
	spec := lt.AgentSpec{
		Model:        lt.ModelSpec{Provider: "scripted", Name: "demo", Script: script},
		Instructions: "Do the task.",
		Tools: []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}, {Name: "send_email", Type: "function", Effect: lt.EffectIrreversible,
			Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}}}`)}},
		Policies: []lt.Policy{{Tool: "send_email", Decision: lt.PolicyAsk}},
		Retry:    &lt.RetryPolicy{InitialBackoffMS: 1, MaxBackoffMS: 1},
	}
	return call[lt.Session](s, http.MethodPost, "/v1/sessions", lt.CreateSessionRequest{AgentSpec: &spec, Input: "go"}, http.StatusCreated).ID
}

// scrape reads /metrics through the API (with the key) and parses it.
func (s *stack) scrape() map[string]*dto.MetricFamily {
	s.t.Helper()
	status, data := s.do(http.MethodGet, "/metrics", nil, apiKey)
	require.Equal(s.t, http.StatusOK, status, "%s", data)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	require.NoError(s.t, err)
	return fams
}

// value returns the value of the series of family name with exactly these
// labels: a counter's or gauge's value, a histogram's count. 0 when there
// is no such series.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	require.Zero(t, len(labels)%2)
	fam, ok := fams[name]
	require.True(t, ok, "no family %s", name)
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(labels)/2 {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			found := false
			for i := 0; i < len(labels); i += 2 {
				if labels[i] == l.GetName() && labels[i+1] == l.GetValue() {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch fam.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

func step(cost float64, tool, args string) map[string]any {
	s := map[string]any{"cost_usd": cost, "usage": map[string]any{"input_tokens": 100, "output_tokens": 10}}
	if tool == "" {
		s["text"] = args
	} else {
		s["tool_calls"] = []any{map[string]any{"name": tool, "arguments": json.RawMessage(args)}}
	}
	return s
}

// journalCounts counts, from the session's journal, what the metrics must
// have counted: only what follows session.forked in a fork.
type journalCounts struct {
	steps, modelErrors, modelRetries int
	input, output                    int64
	cost                             float64
	toolOK, toolErr                  map[string]int
}

func (s *stack) count(ids ...string) journalCounts {
	s.t.Helper()
	c := journalCounts{toolOK: map[string]int{}, toolErr: map[string]int{}}
	for _, id := range ids {
		evs := call[lt.List[lt.Event]](s, http.MethodGet, "/v1/sessions/"+id+"/events?limit=500", nil, http.StatusOK).Data
		require.Less(s.t, len(evs), 500)
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Type == lt.EventSessionForked {
				evs = evs[i+1:]
				break
			}
		}
		for _, ev := range evs {
			switch ev.Type {
			case lt.EventModelResponded:
				var d lt.ModelRespondedData
				require.NoError(s.t, json.Unmarshal(ev.Data, &d))
				c.steps++
				c.input += d.Usage.InputTokens
				c.output += d.Usage.OutputTokens
				c.cost += d.CostUSD
			case lt.EventModelFailed:
				var d lt.ModelFailedData
				require.NoError(s.t, json.Unmarshal(ev.Data, &d))
				c.modelErrors++
				if d.Retry {
					c.modelRetries++
				}
			case lt.EventToolCompleted:
				var d lt.ToolCompletedData
				require.NoError(s.t, json.Unmarshal(ev.Data, &d))
				c.toolOK[d.Tool]++
			case lt.EventToolFailed:
				var d lt.ToolFailedData
				require.NoError(s.t, json.Unmarshal(ev.Data, &d))
				if d.Refused == "" {
					c.toolErr[d.Tool]++
				}
			}
		}
	}
	return c
}

// TestMetrics scrapes /metrics after scripted sessions (a retried model
// call, tool calls that succeed and fail, a pending approval, a fork) and
// checks each metric against the sessions' journals and states.
func TestMetrics(t *testing.T) {
	t.Parallel()
	s := newStack(t)

	retried := s.start(map[string]any{"error": map[string]any{"status": 500}}, step(0.25, "", "done"))
	s.waitStatus(retried, lt.SessionIdle)
	tooled := s.start(
		step(0.125, "write_file", `{"path": "a.md", "content": "a"}`),
		step(0.125, "read_file", `{"path": "missing.md"}`),
		step(0.0625, "", "written"),
	)
	s.waitStatus(tooled, lt.SessionIdle)
	pending := s.start(step(0.5, "send_email", `{"to": "a@example.com"}`))
	waiting := s.waitStatus(pending, lt.SessionRequiresAction)
	require.Len(t, waiting.RequiredActions, 1)

	// A fork copies the journal up to its checkpoint: what it copied is
	// not counted again, only its own new turn.
	cps := call[lt.List[lt.Checkpoint]](s, http.MethodGet, "/v1/sessions/"+tooled+"/checkpoints", nil, http.StatusOK).Data
	require.NotEmpty(t, cps)
	fork := call[lt.Session](s, http.MethodPost, "/v1/sessions/"+tooled+"/fork", lt.ForkRequest{CheckpointID: cps[0].ID, Input: "again"}, http.StatusCreated).ID
	s.waitStatus(fork, lt.SessionIdle)

	fams := s.scrape()
	want := s.count(retried, tooled, pending, fork)
	require.Positive(t, want.steps)
	require.Equal(t, 1, want.modelRetries)
	require.Equal(t, 2, want.toolErr["read_file"], "the missing file is a tool error, in the session and again in its fork")

	require.Equal(t, float64(want.steps), value(t, fams, "longhaul_steps_total"))
	require.Equal(t, float64(want.steps), value(t, fams, "longhaul_model_call_duration_seconds", "provider", "scripted", "model", "demo", "outcome", "ok"))
	require.Equal(t, float64(want.modelErrors), value(t, fams, "longhaul_model_call_duration_seconds", "provider", "scripted", "model", "demo", "outcome", "error"))
	require.Equal(t, float64(want.input), value(t, fams, "longhaul_model_tokens_total", "kind", "input", "provider", "scripted", "model", "demo"))
	require.Equal(t, float64(want.output), value(t, fams, "longhaul_model_tokens_total", "kind", "output", "provider", "scripted", "model", "demo"))
	require.InDelta(t, want.cost, value(t, fams, "longhaul_model_cost_usd_total", "provider", "scripted", "model", "demo"), 1e-9)
	require.Equal(t, 1.0, value(t, fams, "longhaul_retries_total", "kind", "model", "name", "demo"))
	require.Zero(t, value(t, fams, "longhaul_retries_total", "kind", "tool", "name", "write_file"))
	for tool, n := range want.toolOK {
		require.Equal(t, float64(n), value(t, fams, "longhaul_tool_call_duration_seconds", "tool", tool, "outcome", "ok"), tool)
	}
	require.Equal(t, 2.0, value(t, fams, "longhaul_tool_call_duration_seconds", "tool", "read_file", "outcome", "error"))

	// State gauges, from the store.
	require.Equal(t, 3.0, value(t, fams, "longhaul_sessions", "status", "idle"))
	require.Equal(t, 1.0, value(t, fams, "longhaul_sessions", "status", "requires_action"))
	require.Equal(t, 0.0, value(t, fams, "longhaul_sessions", "status", "failed"))
	require.Equal(t, 0.0, value(t, fams, "longhaul_sessions", "status", "paused"))
	require.Len(t, fams["longhaul_sessions"].GetMetric(), 8, "every status is reported, zeros too")
	require.Equal(t, 1.0, value(t, fams, "longhaul_required_actions_pending", "type", "approval"))
	require.Equal(t, 0.0, value(t, fams, "longhaul_required_actions_pending", "type", "input"))
	age := value(t, fams, "longhaul_required_action_oldest_age_seconds", "type", "approval")
	require.InDelta(t, s.metricN().Sub(waiting.RequiredActions[0].CreatedAt).Seconds(), age, 30)
	require.Greater(t, age, 600.0)
	require.Equal(t, 0.0, value(t, fams, "longhaul_required_action_oldest_age_seconds", "type", "input"))

	// Every session creation and journal append of the engine was timed.
	require.Equal(t, 4.0, value(t, fams, "longhaul_journal_append_duration_seconds", "op", "create", "outcome", "ok"))
	require.Positive(t, value(t, fams, "longhaul_journal_append_duration_seconds", "op", "append", "outcome", "ok"))
	require.Zero(t, value(t, fams, "longhaul_lease_takeovers_total"), "no lease was taken over")
	require.Contains(t, fams, "go_goroutines", "the Go runtime's metrics are on the registry")

	// Deciding the approval moves the gauges.
	a := waiting.RequiredActions[0]
	call[lt.Action](s, http.MethodPost, "/v1/sessions/"+pending+"/actions/"+a.ID, lt.Decision{Decision: lt.DecisionApprove}, http.StatusOK)
	s.waitStatus(pending, lt.SessionRequiresAction) // now the function call
	fams = s.scrape()
	require.Equal(t, 0.0, value(t, fams, "longhaul_required_actions_pending", "type", "approval"))
	require.Equal(t, 1.0, value(t, fams, "longhaul_required_actions_pending", "type", "function_call"))

	problems, err := testutil.GatherAndLint(s.m.Registry())
	require.NoError(t, err)
	require.Empty(t, problems, "metric names and help follow the Prometheus conventions")
}

// TestOpenMetricsWhenAsked: a scraper that negotiates OpenMetrics (as
// Prometheus does) gets it, terminated by "# EOF"; one that does not gets
// the classic text format.
func TestOpenMetricsWhenAsked(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for _, tc := range []struct{ accept, contentType string }{
		{"application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"},
		{"", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"},
	} {
		req, err := http.NewRequest(http.MethodGet, s.api.URL+"/metrics", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+apiKey)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		res, err := s.api.Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, tc.contentType, res.Header.Get("Content-Type"))
		if tc.accept != "" {
			require.True(t, bytes.HasSuffix(body, []byte("# EOF\n")), "an OpenMetrics exposition ends with # EOF")
			require.Contains(t, string(body), "# TYPE longhaul_steps counter", "OpenMetrics names a counter's family without _total")
		} else {
			require.NotContains(t, string(body), "# EOF")
		}
	}
}

// TestMetricsAccess: /metrics answers like /v1 (an API key, here) unless
// it is public.
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	status, body := s.do(http.MethodGet, "/metrics", nil, "")
	require.Equal(t, http.StatusUnauthorized, status, "%s", body)
	require.Contains(t, string(body), "unauthorized")
	status, _ = s.do(http.MethodGet, "/metrics", nil, "wrong")
	require.Equal(t, http.StatusUnauthorized, status)
	status, body = s.do(http.MethodGet, "/metrics", nil, apiKey)
	require.Equal(t, http.StatusOK, status)
	require.True(t, strings.Contains(string(body), "# TYPE longhaul_sessions gauge"), "%s", body)

	res, err := s.public.Client().Get(s.public.URL + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "--metrics-public needs no key")
	res2, err := s.public.Client().Get(s.public.URL + "/v1/sessions")
	require.NoError(t, err)
	defer res2.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res2.StatusCode, "the API stays behind the key")

	// A server without metrics has no /metrics.
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(context.Background()))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	eng, err := engine.New(st, &engine.Config{WorkspaceRoot: filepath.Join(t.TempDir(), "w"), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	bare := httptest.NewServer(server.New(apptest.New(t, st, eng, nil), st, &server.Config{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(bare.Close)
	res3, err := bare.Client().Get(bare.URL + "/metrics")
	require.NoError(t, err)
	defer res3.Body.Close()
	require.Equal(t, http.StatusNotFound, res3.StatusCode)
}

// TestMonitorFindingsCounted: each monitor.finding the engine journals is
// counted by its detector.
func TestMonitorFindingsCounted(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id := s.start(
		step(0.01, "read_file", `{"path": "/proc/self/environ"}`),
		step(0.01, "read_file", `{"path": "/proc/1/environ"}`),
		step(0.01, "", "nothing there"),
	)
	s.waitStatus(id, lt.SessionIdle)
	fams := s.scrape()
	require.Equal(t, 2.0, value(t, fams, "longhaul_monitor_findings_total", "detector", "secret_probe"))
	require.Zero(t, value(t, fams, "longhaul_monitor_findings_total", "detector", "escape_signatures"))
	require.Equal(t, 0.0, value(t, fams, "longhaul_required_actions_pending", "type", "monitor"))
}

// TestMonitorReviewsCounted: each monitor.reviewed is counted by its
// verdict, a failed review as a pause.
func TestMonitorReviewsCounted(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	script, err := json.Marshal([]any{
		step(0.01, "read_file", `{"path": "a.txt"}`),
		step(0.01, "read_file", `{"path": "b.txt"}`),
		step(0.01, "", "done"),
	})
	require.NoError(t, err)
	monitor := `[{"text":"{\"verdict\":\"ok\"}","cost_usd":0.5},{"text":"{\"verdict\":\"warn\",\"reasons\":[\"hm\"]}"},{"text":"not json"}]`
	spec := lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: script},
		Tools: []lt.ToolSpec{{Name: "read_file"}},
		Monitor: &lt.MonitorSpec{EverySteps: 1,
			Model: &lt.ModelSpec{Provider: "scripted", Name: "watcher", Script: json.RawMessage(monitor)}},
	}
	id := call[lt.Session](s, http.MethodPost, "/v1/sessions", lt.CreateSessionRequest{AgentSpec: &spec, Input: "go"}, http.StatusCreated).ID
	s.waitStatus(id, lt.SessionRequiresAction)
	fams := s.scrape()
	require.Equal(t, 1.0, value(t, fams, "longhaul_monitor_reviews_total", "verdict", "ok"))
	require.Equal(t, 1.0, value(t, fams, "longhaul_monitor_reviews_total", "verdict", "warn"))
	require.Equal(t, 1.0, value(t, fams, "longhaul_monitor_reviews_total", "verdict", "pause"))
	require.Equal(t, 1.0, value(t, fams, "longhaul_required_actions_pending", "type", "monitor"))
}
