package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// clock is the system clock moved to a fixed day and forward by a
// settable offset: sessions are created on the days a test chooses, and
// the engine's waits still pass in real time.
type clock struct {
	base, start time.Time
	mu          sync.Mutex
	offset      time.Duration
}

func newClock(base time.Time) *clock { return &clock{base: base, start: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Add(time.Since(c.start) + c.offset).UTC()
}

func (c *clock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// harness is the real stack: SQLite in t.TempDir(), the engine with the
// scripted provider, and the server with the report service in its
// backend, as a node wires it.
type harness struct {
	t     *testing.T
	clock *clock
	ts    *httptest.Server
}

func newHarness(t *testing.T, base time.Time) *harness {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	clk := newClock(base)
	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"),
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
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
	srv := server.New(apptest.New(t, st, eng, report.New(st, &report.Config{Now: clk.Now})), st, &server.Config{Logger: slog.New(slog.DiscardHandler)})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Shutdown()
		ts.Close()
	})
	return &harness{t: t, clock: clk, ts: ts}
}

func (h *harness) do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(h.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.ts.URL+path, rd)
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := h.ts.Client().Do(req)
	require.NoError(h.t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	return res.StatusCode, data
}

// call makes a request that must answer want, and decodes the body
// strictly (a field the wire types lack fails the test).
func call[T any](h *harness, method, path string, body any, want int) T {
	h.t.Helper()
	status, data := h.do(method, path, body)
	require.Equal(h.t, want, status, "%s %s: %s", method, path, data)
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(h.t, dec.Decode(&v), "body: %s", data)
	return v
}

func (h *harness) session(id string) lt.Session {
	return call[lt.Session](h, http.MethodGet, "/v1/sessions/"+id, nil, http.StatusOK)
}

// waitStatus polls the session until its status is want.
func (h *harness) waitStatus(id string, want lt.SessionStatus) lt.Session {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := h.session(id)
		if s.Status == want {
			return s
		}
		require.False(h.t, s.Status.Terminal() && s.Status != want, "session %s ended %s (%v), want %s", id, s.Status, s.StopReason, want)
		require.True(h.t, time.Now().Before(deadline), "session %s still %s, want %s", id, s.Status, want)
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an event
	}
}

// decide waits for the session's one pending action, of type typ, and
// decides it.
func (h *harness) decide(id string, typ lt.ActionType, decision any) {
	h.t.Helper()
	s := h.waitStatus(id, lt.SessionRequiresAction)
	require.Len(h.t, s.RequiredActions, 1)
	a := s.RequiredActions[0]
	require.Equal(h.t, typ, a.Type)
	call[lt.Action](h, http.MethodPost, "/v1/sessions/"+id+"/actions/"+a.ID, decision, http.StatusOK)
}

func (h *harness) review(id string, accepted bool, note string) lt.Session {
	h.t.Helper()
	return call[lt.Session](h, http.MethodPost, "/v1/sessions/"+id+"/review", lt.ReviewRequest{Accepted: &accepted, Note: note}, http.StatusOK)
}

func (h *harness) report(query string) lt.TaskReport {
	h.t.Helper()
	return call[lt.TaskReport](h, http.MethodGet, "/v1/reports/tasks?"+query, nil, http.StatusOK)
}

// step is one scripted model call; cost is what it reports.
func step(cost float64, tool string, args string) map[string]any {
	s := map[string]any{"cost_usd": cost, "usage": map[string]any{"input_tokens": 100, "output_tokens": 10}}
	if tool == "" {
		s["text"] = args
	} else {
		s["tool_calls"] = []any{map[string]any{"name": tool, "arguments": json.RawMessage(args)}}
	}
	return s
}

func spec(t *testing.T, tools []lt.ToolSpec, policies []lt.Policy, steps ...any) lt.AgentSpec {
	t.Helper()
	script, err := json.Marshal(steps)
	require.NoError(t, err)
	return lt.AgentSpec{
		Model:        lt.ModelSpec{Provider: "scripted", Name: "demo", Script: script},
		Instructions: "Do the task.",
		Tools:        tools,
		Policies:     policies,
		// Retries wait a millisecond, not a second.
		Retry: &lt.RetryPolicy{InitialBackoffMS: 1, MaxBackoffMS: 1},
	}
}

var sendEmail = lt.ToolSpec{
	Name: "send_email", Type: "function", Effect: lt.EffectIrreversible,
	Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`),
}

func (h *harness) start(req lt.CreateSessionRequest) string {
	h.t.Helper()
	if req.Input == "" {
		req.Input = "do the task"
	}
	return call[lt.Session](h, http.MethodPost, "/v1/sessions", req, http.StatusCreated).ID
}

// TestTaskReport runs scripted tasks over two days (accepted, rejected,
// one that asked a person for input, one with an approval, one retried, one
// failed, one with a sub-agent, a fork) and checks every field of the
// report against the sessions, the totals, the series, paging and the
// filters.
func TestTaskReport(t *testing.T) {
	t.Parallel()
	day1 := time.Date(2030, 6, 10, 9, 0, 0, 0, time.UTC)
	h := newHarness(t, day1)

	writer := spec(t, []lt.ToolSpec{{Name: "write_file"}, {Name: "checkpoint"}, {Name: "finish"}}, nil,
		step(0.25, "write_file", `{"path": "notes.md", "content": "# Notes"}`),
		step(0.125, "checkpoint", `{"name": "draft written", "summary": "notes.md has a draft", "next_action": "deliver it"}`),
		step(0.125, "finish", `{"summary": "notes written", "artifacts": ["notes.md"]}`),
	)
	call[lt.Agent](h, http.MethodPost, "/v1/agents", lt.PutAgentRequest{Name: "writer", Spec: writer}, http.StatusCreated)

	// Day 1: two writer tasks (accepted, rejected) and one that asks.
	accepted := h.start(lt.CreateSessionRequest{Agent: "writer", Goal: "notes exist"})
	h.waitStatus(accepted, lt.SessionIdle)
	h.review(accepted, true, "good notes")
	rejected := h.start(lt.CreateSessionRequest{Agent: "writer"})
	h.waitStatus(rejected, lt.SessionIdle)
	h.review(rejected, false, "too short")
	asked := h.start(lt.CreateSessionRequest{AgentSpec: ptr(spec(t, []lt.ToolSpec{{Name: "ask_human"}}, nil,
		step(0.25, "ask_human", `{"question": "Which region?"}`),
		step(0.25, "", "done for eu"),
	))})
	h.decide(asked, lt.ActionInput, lt.Decision{Answer: "eu"})
	h.waitStatus(asked, lt.SessionIdle)
	h.review(asked, true, "")

	// Day 2: an approval (and the function call it leads to), a retry, a
	// failure, a sub-agent, and a fork of the accepted task.
	h.clock.advance(24 * time.Hour)
	approved := h.start(lt.CreateSessionRequest{AgentSpec: ptr(spec(t, []lt.ToolSpec{sendEmail},
		[]lt.Policy{{Tool: "send_email", Decision: lt.PolicyAsk}},
		step(0.25, "send_email", `{"to": "a@example.com"}`),
		step(0.125, "", "sent"),
	))})
	h.decide(approved, lt.ActionApproval, lt.Decision{Decision: lt.DecisionApprove})
	h.decide(approved, lt.ActionFunctionCall, lt.Decision{Output: json.RawMessage(`{"sent": true}`)})
	h.waitStatus(approved, lt.SessionIdle)

	retried := h.start(lt.CreateSessionRequest{AgentSpec: ptr(spec(t, nil, nil,
		map[string]any{"error": map[string]any{"status": 500}},
		step(0.5, "", "done after a retry"),
	))})
	h.waitStatus(retried, lt.SessionIdle)

	failed := h.start(lt.CreateSessionRequest{AgentSpec: ptr(spec(t, nil, nil,
		map[string]any{"error": map[string]any{"status": 400, "message": "bad request"}},
	))})
	h.waitStatus(failed, lt.SessionFailed)

	child, err := json.Marshal(spec(t, nil, nil, step(0.25, "", "child done")))
	require.NoError(t, err)
	parent := h.start(lt.CreateSessionRequest{AgentSpec: ptr(spec(t, []lt.ToolSpec{{Name: "spawn_agent"}, {Name: "wait_agents"}}, nil,
		step(0.125, "spawn_agent", `{"agent_spec": `+string(child)+`, "input": "sub-task"}`),
		step(0.0625, "wait_agents", `{}`),
		step(0.0625, "", "parent done"),
	))})
	parentSess := h.waitStatus(parent, lt.SessionIdle)
	h.review(parent, true, "")
	kids := call[lt.List[lt.Session]](h, http.MethodGet, "/v1/sessions?parent_id="+parent, nil, http.StatusOK).Data
	require.Len(t, kids, 1)
	kid := h.waitStatus(kids[0].ID, lt.SessionIdle)

	cps := call[lt.List[lt.Checkpoint]](h, http.MethodGet, "/v1/sessions/"+accepted+"/checkpoints", nil, http.StatusOK).Data
	var named lt.Checkpoint
	for _, c := range cps {
		if c.Kind == lt.CheckpointNamed {
			named = c
		}
	}
	require.Equal(t, "draft written", named.Name)
	fork := call[lt.Session](h, http.MethodPost, "/v1/sessions/"+accepted+"/fork",
		lt.ForkRequest{CheckpointID: named.ID, Input: "deliver it again"}, http.StatusCreated).ID
	forkSess := h.waitStatus(fork, lt.SessionIdle)

	rep := h.report("since=2030-06-09T00:00:00Z&until=2030-06-12T00:00:00Z")
	require.Equal(t, day1.Add(-33*time.Hour), rep.Since)
	require.Equal(t, day1.Add(39*time.Hour), rep.Until)
	require.Equal(t, lt.BucketDay, rep.Bucket, "a three-day window is charted by day")
	require.False(t, rep.IncludeSubagents)
	require.Nil(t, rep.NextCursor)

	// Newest first, roots only.
	ids := make([]string, len(rep.Data))
	byID := map[string]lt.TaskRecord{}
	for i, r := range rep.Data {
		ids[i] = r.ID
		byID[r.ID] = r
	}
	require.Equal(t, []string{fork, parent, failed, retried, approved, asked, rejected, accepted}, ids)

	// Every record agrees with its session.
	for _, r := range rep.Data {
		s := h.session(r.ID)
		require.Equal(t, s.Agent, r.Agent, r.ID)
		require.Equal(t, s.Status, r.Status, r.ID)
		require.Equal(t, s.StopReason, r.StopReason, r.ID)
		require.Equal(t, s.Review, r.Review, r.ID)
		require.Equal(t, s.CreatedAt, r.CreatedAt, r.ID)
		require.Nil(t, r.ParentID, r.ID)
		require.NotNil(t, r.EndedAt, r.ID)
		require.False(t, r.EndedAt.Before(r.CreatedAt), r.ID)
		require.InDelta(t, r.EndedAt.Sub(r.CreatedAt).Seconds(), r.DurationSeconds, 1e-6, r.ID)
		require.Equal(t, r.Usage.CostUSD, r.CostUSD, r.ID)
		require.Equal(t, r.CostUSD, r.ModelCostUSD+r.SubagentCostUSD, r.ID)
		if r.ID != fork {
			require.Equal(t, 1, r.Turns, r.ID)
			require.Equal(t, s.Usage, r.Usage, "%s: a task's usage is its session's", r.ID)
		}
		if r.Review == nil {
			require.Nil(t, r.Accepted, r.ID)
		} else {
			require.Equal(t, r.Review.Accepted, *r.Accepted, r.ID)
		}
		cps := call[lt.List[lt.Checkpoint]](h, http.MethodGet, "/v1/sessions/"+r.ID+"/checkpoints", nil, http.StatusOK).Data
		if len(cps) == 0 {
			require.Nil(t, r.LastCheckpoint, r.ID)
			continue
		}
		last := cps[len(cps)-1]
		require.Equal(t, &lt.TaskCheckpoint{ID: last.ID, Name: last.Name, Kind: last.Kind, TurnID: last.TurnID, Step: last.Step, At: last.CreatedAt},
			r.LastCheckpoint, r.ID)
	}

	// Per task: what it asked, retried, cost and became.
	type want struct {
		asks          map[lt.ActionType]int
		retries       int
		cost          float64
		model         float64
		subagents     int
		status        lt.SessionStatus
		accepted      *bool
		checkpointKnd string
	}
	yes, no := true, false
	for id, w := range map[string]want{
		accepted: {cost: 0.5, model: 0.5, status: lt.SessionIdle, accepted: &yes, checkpointKnd: lt.CheckpointTurn},
		rejected: {cost: 0.5, model: 0.5, status: lt.SessionIdle, accepted: &no, checkpointKnd: lt.CheckpointTurn},
		asked:    {asks: map[lt.ActionType]int{lt.ActionInput: 1}, cost: 0.5, model: 0.5, status: lt.SessionIdle, accepted: &yes, checkpointKnd: lt.CheckpointTurn},
		approved: {asks: map[lt.ActionType]int{lt.ActionApproval: 1}, cost: 0.375, model: 0.375, status: lt.SessionIdle, checkpointKnd: lt.CheckpointTurn},
		retried:  {retries: 1, cost: 0.5, model: 0.5, status: lt.SessionIdle, checkpointKnd: lt.CheckpointTurn},
		failed:   {status: lt.SessionFailed},
		parent:   {cost: 0.5, model: 0.25, subagents: 1, status: lt.SessionIdle, accepted: &yes, checkpointKnd: lt.CheckpointTurn},
		fork:     {cost: 0.125, model: 0.125, status: lt.SessionIdle, checkpointKnd: lt.CheckpointTurn},
	} {
		r := byID[id]
		if w.asks == nil {
			w.asks = map[lt.ActionType]int{}
		}
		require.Equal(t, w.asks, r.AsksByType, id)
		asks := 0
		for _, n := range w.asks {
			asks += n
		}
		require.Equal(t, asks, r.Asks, id)
		require.Equal(t, w.asks[lt.ActionInput] == 0, r.InputComplete, id)
		require.Equal(t, w.retries, r.Retries, id)
		require.Equal(t, w.cost, r.CostUSD, id)
		require.Equal(t, w.model, r.ModelCostUSD, id)
		require.Equal(t, w.subagents, r.Subagents, id)
		require.Equal(t, w.status, r.Status, id)
		require.Equal(t, w.accepted, r.Accepted, id)
		if w.checkpointKnd == "" {
			require.Nil(t, r.LastCheckpoint, id)
		} else {
			require.Equal(t, w.checkpointKnd, r.LastCheckpoint.Kind, id)
		}
	}
	require.Equal(t, lt.StopProviderError, *byID[failed].StopReason)
	require.Equal(t, "notes exist", byID[accepted].Goal)
	require.Equal(t, lt.AgentRef{Name: "writer", Version: 1}, byID[accepted].Agent)
	require.Equal(t, "good notes", byID[accepted].Review.Note)
	require.Equal(t, parentSess.Usage, byID[parent].Usage, "the sub-agent's usage is rolled into its parent's")
	require.Equal(t, kid.Usage.CostUSD, byID[parent].SubagentCostUSD)
	require.Equal(t, int64(4), byID[parent].Usage.ModelCalls, "three calls of the parent, one of the sub-agent")
	// The fork's usage is its own: its session's less what it inherited
	// (the two calls before the checkpoint it was forked from).
	require.Equal(t, forkSess.Usage.CostUSD-0.375, byID[fork].CostUSD)
	require.Equal(t, forkSess.Usage.ModelCalls-2, byID[fork].Usage.ModelCalls)
	require.Equal(t, lt.AgentRef{Name: "writer", Version: 1}, byID[fork].Agent)
	require.Equal(t, 2, byID[fork].Turns, "the fork's turn follows the one it copied")

	// Totals over the whole window.
	tot := rep.Totals
	require.Equal(t, 8, tot.Tasks)
	require.Equal(t, map[lt.SessionStatus]int{lt.SessionIdle: 7, lt.SessionFailed: 1}, tot.ByStatus)
	require.Equal(t, 4, tot.Reviewed)
	require.Equal(t, 3, tot.Accepted)
	require.Equal(t, 1, tot.Rejected)
	require.Equal(t, 0.75, *tot.AcceptanceRate)
	require.Equal(t, 7, tot.InputComplete)
	require.Equal(t, 2, tot.Asks)
	require.Equal(t, 0.25, *tot.AsksPerTask)
	require.Equal(t, 1, tot.Retries)
	require.Equal(t, 3.0, tot.CostUSD, "every task's cost, the failed and the rejected ones too")
	require.Equal(t, 1.0, *tot.CostPerAcceptedTaskUSD, "3 dollars for 3 accepted tasks")
	var sum lt.Usage
	for _, r := range rep.Data {
		sum.Add(r.Usage)
	}
	require.Equal(t, sum, tot.Usage)

	// The series: one bucket per UTC day, the empty first one included.
	require.Equal(t, []lt.TaskBucket{
		{Start: time.Date(2030, 6, 9, 0, 0, 0, 0, time.UTC)},
		{Start: time.Date(2030, 6, 10, 0, 0, 0, 0, time.UTC), Tasks: 3, Reviewed: 3, Accepted: 2, CostUSD: 1.5},
		{Start: time.Date(2030, 6, 11, 0, 0, 0, 0, time.UTC), Tasks: 5, Reviewed: 1, Accepted: 1, CostUSD: 1.5},
	}, rep.Series)

	t.Run("paging keeps the totals of the whole window", func(t *testing.T) {
		var got []string
		cursor := ""
		for page := 0; ; page++ {
			q := "since=2030-06-09T00:00:00Z&until=2030-06-12T00:00:00Z&limit=3"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			p := h.report(q)
			require.Equal(t, rep.Totals, p.Totals, "page %d", page)
			require.Equal(t, rep.Series, p.Series, "page %d", page)
			for _, r := range p.Data {
				got = append(got, r.ID)
			}
			if p.NextCursor == nil {
				require.Len(t, p.Data, 2)
				break
			}
			require.Len(t, p.Data, 3)
			cursor = *p.NextCursor
		}
		require.Equal(t, ids, got)
	})

	t.Run("sub-agents as tasks count each session's own cost once", func(t *testing.T) {
		p := h.report("since=2030-06-09T00:00:00Z&until=2030-06-12T00:00:00Z&include_subagents=true")
		require.True(t, p.IncludeSubagents)
		require.Equal(t, 9, p.Totals.Tasks)
		require.Equal(t, 3.0, p.Totals.CostUSD)
		require.Equal(t, rep.Totals.Usage, p.Totals.Usage)
		var sub *lt.TaskRecord
		for i := range p.Data {
			if p.Data[i].ID == kid.ID {
				sub = &p.Data[i]
			}
		}
		require.NotNil(t, sub)
		require.Equal(t, parent, *sub.ParentID)
		require.Equal(t, 0.25, sub.CostUSD)
		require.Equal(t, kid.Usage, sub.Usage)
	})

	t.Run("an agent's tasks", func(t *testing.T) {
		p := h.report("since=2030-06-09T00:00:00Z&until=2030-06-12T00:00:00Z&agent=writer")
		require.Equal(t, "writer", p.Agent)
		require.Len(t, p.Data, 3)
		require.Equal(t, []string{fork, rejected, accepted}, []string{p.Data[0].ID, p.Data[1].ID, p.Data[2].ID})
		require.Equal(t, 1.125, p.Totals.CostUSD)
		require.Equal(t, 1.125, *p.Totals.CostPerAcceptedTaskUSD)
		require.Equal(t, 0.5, *p.Totals.AcceptanceRate)
	})

	t.Run("durations before now and hourly buckets", func(t *testing.T) {
		// The report's clock is a day past day 1's tasks: 24 hours back
		// hold day 2's tasks only.
		p := h.report("since=24h")
		require.Equal(t, lt.BucketHour, p.Bucket)
		require.Len(t, p.Series, 25, "24 hours that do not start on the hour span 25 buckets")
		require.Equal(t, 5, p.Totals.Tasks)
		require.Equal(t, p.Until.Add(-24*time.Hour), p.Since)
		hours := 0
		for _, b := range p.Series {
			hours += b.Tasks
			require.Zero(t, b.Start.Minute())
		}
		require.Equal(t, 5, hours)

		week := h.report("")
		require.Equal(t, week.Until.Add(-7*24*time.Hour), week.Since, "the default window is a week")
		require.Equal(t, 8, week.Totals.Tasks)
		require.Equal(t, lt.BucketDay, week.Bucket)

		empty := h.report("since=2d&until=30d")
		require.Equal(t, 0, empty.Totals.Tasks)
		require.Empty(t, empty.Data)
		require.Nil(t, empty.Totals.AcceptanceRate)
		require.Nil(t, empty.Totals.AsksPerTask)
		require.Nil(t, empty.Totals.CostPerAcceptedTaskUSD)
	})

	t.Run("bad parameters name the field", func(t *testing.T) {
		for query, field := range map[string]string{
			"since=yesterday": "since",
			"until=soon":      "until",
			"since=-5h":       "since",
			"since=2030-06-12T00:00:00Z&until=2030-06-11T00:00:00Z": "since",
			"bucket=minute":           "bucket",
			"since=1000d&bucket=hour": "bucket",
			"include_subagents=yes":   "include_subagents",
			"limit=0":                 "limit",
			"limit=501":               "limit",
			"cursor=ses_nope":         "cursor",
			"since=1d&since=2d":       "since",
		} {
			status, body := h.do(http.MethodGet, "/v1/reports/tasks?"+query, nil)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", query, body)
			var e lt.ErrorResponse
			require.NoError(t, json.Unmarshal(body, &e))
			require.Equal(t, lt.CodeInvalidRequest, e.Error.Code, query)
			require.Equal(t, field, e.Error.Field, "%s: %s", query, body)
			require.NotEmpty(t, e.Error.Message)
		}
	})
}

func ptr[T any](v T) *T { return &v }
