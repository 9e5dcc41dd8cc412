package otelexport_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/otelexport"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const waitTimeout = 20 * time.Second

// receiver is an OTLP/HTTP collector: it decodes each request as the
// protobuf ExportTraceServiceRequest the specification defines.
type receiver struct {
	t    *testing.T
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
	errs []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case req.Method != http.MethodPost || req.URL.Path != "/v1/traces":
			r.errs = append(r.errs, "unexpected request "+req.Method+" "+req.URL.Path)
		case req.Header.Get("Content-Type") != "application/x-protobuf":
			r.errs = append(r.errs, "content type "+req.Header.Get("Content-Type"))
		case err != nil:
			r.errs = append(r.errs, err.Error())
		default:
			r.reqs = append(r.reqs, &msg)
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// spans returns every span received, by trace id (hex), and the resources.
func (r *receiver) spans() (map[string][]*tracepb.Span, []*tracepb.ResourceSpans) {
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(r.t, r.errs)
	out := map[string][]*tracepb.Span{}
	var res []*tracepb.ResourceSpans
	for _, req := range r.reqs {
		for _, rs := range req.ResourceSpans {
			res = append(res, rs)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					id := hex.EncodeToString(s.TraceId)
					out[id] = append(out[id], s)
				}
			}
		}
	}
	return out, res
}

func attrs(s *tracepb.Span) map[string]*commonpb.AnyValue {
	out := map[string]*commonpb.AnyValue{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value
	}
	return out
}

func str(t *testing.T, s *tracepb.Span, key string) string {
	t.Helper()
	v, ok := attrs(s)[key]
	require.True(t, ok, "span %q has no attribute %s", s.Name, key)
	return v.GetStringValue()
}

func num(t *testing.T, s *tracepb.Span, key string) int64 {
	t.Helper()
	v, ok := attrs(s)[key]
	require.True(t, ok, "span %q has no attribute %s", s.Name, key)
	return v.GetIntValue()
}

type node struct {
	store *sqlite.Store
	eng   *engine.Engine
}

func startEngine(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"),
		NodeID:        "node-a",
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
		Logger:        slog.New(slog.DiscardHandler),
		PollInterval:  10 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, eng.Stop(stopCtx))
		require.NoError(t, st.Close())
	})
	return &node{store: st, eng: eng}
}

func startExporter(t *testing.T, n *node, cfg *otelexport.Config) *otelexport.Exporter {
	t.Helper()
	ctx := context.Background()
	x, err := otelexport.New(ctx, n.eng, n.store, cfg)
	require.NoError(t, err)
	require.NoError(t, x.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, x.Stop(stopCtx))
	})
	return x
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func waitStatus(t *testing.T, eng *engine.Engine, id string, want lt.SessionStatus) *lt.Session {
	t.Helper()
	var s *lt.Session
	waitFor(t, "session "+id+" "+string(want), func() bool {
		var err error
		s, err = eng.GetSession(context.Background(), id)
		require.NoError(t, err)
		return s.Status == want
	})
	return s
}

// TestExportsEachTurnOverOTLP runs a session of two turns with the real
// engine: the first completes after a model error and a tool call, the
// second is stopped by a person through the API. Each arrives at an OTLP
// receiver as one trace with the journal's times, GenAI names and
// attributes; an exporter of another node sends nothing.
func TestExportsEachTurnOverOTLP(t *testing.T) {
	t.Parallel()
	n := startEngine(t)
	recv := newReceiver(t)
	x := startExporter(t, n, &otelexport.Config{NodeID: "node-a", Endpoint: recv.srv.URL, Protocol: otelexport.ProtocolHTTPProtobuf, Logger: slog.New(slog.DiscardHandler)})
	other := newReceiver(t)
	y := startExporter(t, n, &otelexport.Config{NodeID: "node-b", Endpoint: other.srv.URL + "/v1/traces", Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()

	s, err := n.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: json.RawMessage(`[
			  {"error": {"status": 500}},
			  {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.md", "content": "a"}}], "usage": {"input_tokens": 1200, "output_tokens": 30}},
			  {"text": "done", "usage": {"input_tokens": 1300, "output_tokens": 4}},
			  {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hi"}}]}]`)},
			Instructions: "Write.",
			Tools:        []lt.ToolSpec{{Name: "write_file"}, {Name: "shell"}},
			Policies:     []lt.Policy{{Tool: "shell", Decision: lt.PolicyAsk}},
		},
		Input: "write a.md",
	})
	require.NoError(t, err)
	s = waitStatus(t, n.eng, s.ID, lt.SessionIdle)
	turn1 := s.CurrentTurnID
	t2, err := n.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "now run it"})
	require.NoError(t, err)
	s = waitStatus(t, n.eng, s.ID, lt.SessionRequiresAction)
	_, err = n.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionStop, Reason: "not now"})
	require.NoError(t, err)
	waitStatus(t, n.eng, s.ID, lt.SessionFailed)

	waitFor(t, "two exported turns", func() bool { return x.Stats().Exported == 2 })
	waitFor(t, "the other node to see both ends", func() bool { return y.Stats().Skipped == 2 })
	require.Zero(t, x.Stats().Failed)
	require.Zero(t, y.Stats().Exported)
	got, _ := other.spans()
	require.Empty(t, got, "a node exports only the turns it ended")

	traces, resources := recv.spans()
	require.Len(t, traces, 2)
	for _, rs := range resources {
		res := map[string]string{}
		for _, kv := range rs.Resource.Attributes {
			res[kv.Key] = kv.Value.GetStringValue()
		}
		require.Equal(t, "longhaul", res["service.name"])
		require.Equal(t, "node-a", res["service.instance.id"])
	}
	want, err := n.eng.SessionTrace(ctx, s.ID, false)
	require.NoError(t, err)

	// Turn 1: one trace, its id derived from the session and the turn.
	tid := otelexport.TraceID(s.ID, turn1)
	spans := traces[tid.String()]
	require.NotEmpty(t, spans, "trace %s", tid)
	byID := map[string]*tracepb.Span{}
	for _, sp := range spans {
		byID[hex.EncodeToString(sp.SpanId)] = sp
	}
	spanOf := func(longhaulID string) *tracepb.Span {
		t.Helper()
		sp := byID[otelexport.SpanID(tid, longhaulID).String()]
		require.NotNil(t, sp, "span %s", longhaulID)
		require.Equal(t, longhaulID, str(t, sp, "longhaul.span.id"))
		return sp
	}
	wantTurn := want.Spans[0]
	require.Equal(t, turn1, wantTurn.ID)
	root := spanOf(turn1)
	require.Equal(t, "invoke_agent inline", root.Name)
	require.Empty(t, root.ParentSpanId)
	require.Equal(t, tracepb.Span_SPAN_KIND_INTERNAL, root.Kind)
	require.Equal(t, "invoke_agent", str(t, root, "gen_ai.operation.name"))
	require.Equal(t, "inline", str(t, root, "gen_ai.agent.name"))
	require.Equal(t, s.ID, str(t, root, "gen_ai.conversation.id"))
	require.Equal(t, s.ID, str(t, root, "longhaul.session.id"))
	require.Equal(t, turn1, str(t, root, "longhaul.turn.id"))
	require.Equal(t, int64(2500), num(t, root, "gen_ai.usage.input_tokens"))
	require.Equal(t, uint64(wantTurn.Start.UnixNano()), root.StartTimeUnixNano, "the journal's times, not the export's")
	require.Equal(t, uint64(wantTurn.End.UnixNano()), root.EndTimeUnixNano)
	require.Equal(t, tracepb.Status_STATUS_CODE_UNSET, root.Status.GetCode())

	// Every span of the turn was sent, each under its parent, with its
	// journal times.
	var walk func(sp lt.Span, parent *tracepb.Span)
	count := 0
	walk = func(sp lt.Span, parent *tracepb.Span) {
		got := spanOf(sp.ID)
		count++
		if parent != nil {
			require.Equal(t, parent.SpanId, got.ParentSpanId, "parent of %s", sp.ID)
		}
		require.Equal(t, uint64(sp.Start.UnixNano()), got.StartTimeUnixNano, sp.ID)
		require.Equal(t, uint64(sp.End.UnixNano()), got.EndTimeUnixNano, sp.ID)
		for _, k := range sp.Children {
			walk(k, got)
		}
	}
	walk(wantTurn, nil)
	require.Len(t, spans, count)

	step1 := wantTurn.Children[0]
	require.Equal(t, "step 1", spanOf(step1.ID).Name)
	require.Equal(t, int64(1), num(t, spanOf(step1.ID), "longhaul.step"))
	failed := spanOf(step1.Children[0].ID)
	require.Equal(t, "chat demo", failed.Name)
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, failed.Kind)
	require.Equal(t, tracepb.Status_STATUS_CODE_ERROR, failed.Status.GetCode())
	require.NotEmpty(t, failed.Status.GetMessage())
	require.Equal(t, "server_error", str(t, failed, "error.type"))
	chat := spanOf(step1.Children[1].ID)
	require.Equal(t, "chat", str(t, chat, "gen_ai.operation.name"))
	require.Equal(t, "scripted", str(t, chat, "gen_ai.provider.name"))
	require.Equal(t, "demo", str(t, chat, "gen_ai.request.model"))
	require.Equal(t, int64(1200), num(t, chat, "gen_ai.usage.input_tokens"))
	require.Equal(t, int64(30), num(t, chat, "gen_ai.usage.output_tokens"))
	require.Contains(t, attrs(chat), "longhaul.cost_usd")
	require.NotContains(t, attrs(chat), "gen_ai.response.finish_reasons", "the scripted model gives no finish reason")
	tool := spanOf(step1.Children[2].ID)
	require.Equal(t, "execute_tool write_file", tool.Name)
	require.Equal(t, "execute_tool", str(t, tool, "gen_ai.operation.name"))
	require.Equal(t, "write_file", str(t, tool, "gen_ai.tool.name"))
	require.Equal(t, step1.Children[2].Attributes.CallID, str(t, tool, "gen_ai.tool.call.id"))
	require.Equal(t, "extension", str(t, tool, "gen_ai.tool.type"))
	require.Equal(t, "idempotent", str(t, tool, "longhaul.effect.class"))
	require.NotEmpty(t, str(t, tool, "longhaul.effect.id"))

	// Turn 2 was ended by a person through the API: exported by the node
	// that ran it, with an error status.
	tid2 := otelexport.TraceID(s.ID, t2.ID)
	require.NotEqual(t, tid, tid2)
	spans2 := traces[tid2.String()]
	require.NotEmpty(t, spans2)
	var root2 *tracepb.Span
	for _, sp := range spans2 {
		if len(sp.ParentSpanId) == 0 {
			root2 = sp
		}
	}
	require.NotNil(t, root2)
	require.Equal(t, tracepb.Status_STATUS_CODE_ERROR, root2.Status.GetCode())
	require.Equal(t, lt.StopStopped, str(t, root2, "longhaul.stop_reason"))
}
