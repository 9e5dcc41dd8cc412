package otelexport_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/longhaul-dev/longhaul/internal/otelexport"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/trace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fakeClock is the exporter's clock, moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// journals is a Source and a Notifier over hand-made journals; its traces
// are derived by package trace, as the engine's are.
type journals struct {
	t      *testing.T
	mu     sync.Mutex
	events map[string][]lt.Event
	ch     chan store.Notification
}

func newJournals(t *testing.T) *journals {
	return &journals{t: t, events: map[string][]lt.Event{}, ch: make(chan store.Notification, 16)}
}

func (j *journals) Subscribe(ctx context.Context) (<-chan store.Notification, func()) {
	out := make(chan store.Notification)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(out)
		for {
			select {
			case n := <-j.ch:
				select {
				case out <- n:
				case <-stop:
					return
				case <-ctx.Done():
					return
				}
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, func() { once.Do(func() { close(stop) }) }
}

func (j *journals) ListEvents(_ context.Context, id string, after int64, limit int) ([]lt.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []lt.Event
	for _, ev := range j.events[id] {
		if ev.Seq > after && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

func (j *journals) SessionTrace(_ context.Context, id string, _ bool) (*lt.Trace, error) {
	j.mu.Lock()
	evs := append([]lt.Event(nil), j.events[id]...)
	j.mu.Unlock()
	return trace.Build(evs, nil)
}

// add appends an event written by worker at time at, and notifies.
func (j *journals) add(id, worker string, at time.Time, typ, turn string, data any) {
	j.t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(j.t, err)
	j.mu.Lock()
	seq := int64(len(j.events[id]) + 1)
	j.events[id] = append(j.events[id], lt.Event{Seq: seq, Type: typ, Time: at, SessionID: id, TurnID: turn, WorkerID: worker, Data: raw})
	j.mu.Unlock()
	j.ch <- store.Notification{Kind: store.KindEvents, SessionID: id, Seq: seq}
}

// turn appends a whole turn: one step whose model call answers.
func (j *journals) turn(id, worker, turnID string, index int, at time.Time) {
	j.add(id, worker, at, lt.EventTurnCreated, turnID, lt.TurnCreatedData{TurnID: turnID, Index: index})
	j.add(id, worker, at, lt.EventTurnStarted, turnID, lt.TurnStartedData{TurnID: turnID})
	j.add(id, worker, at, lt.EventModelRequested, turnID, lt.ModelRequestedData{Step: 1, Attempt: 1, Provider: "openai", Model: "gpt-x"})
	j.add(id, worker, at.Add(time.Second), lt.EventModelResponded, turnID, lt.ModelRespondedData{Step: 1, Text: "ok", Usage: lt.Usage{InputTokens: 3, OutputTokens: 1}, Model: "gpt-x-2025", StopReason: "stop"})
	j.add(id, worker, at.Add(2*time.Second), lt.EventTurnCompleted, turnID, lt.TurnCompletedData{TurnID: turnID, Output: "ok"})
}

// grpcReceiver is an OTLP/gRPC collector.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (g *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			g.spans = append(g.spans, ss.Spans...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (g *grpcReceiver) byName() map[string]*tracepb.Span {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]*tracepb.Span{}
	for _, s := range g.spans {
		out[s.Name] = s
	}
	return out
}

func newGRPCReceiver(t *testing.T) (*grpcReceiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &grpcReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, g)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return g, "http://" + ln.Addr().String()
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	j := newJournals(t)
	ctx := context.Background()
	for _, tc := range []struct {
		cfg  *otelexport.Config
		want string
	}{
		{nil, "NodeID is required"},
		{&otelexport.Config{NodeID: "n", Protocol: "udp"}, `Protocol "udp"`},
		{&otelexport.Config{NodeID: "n", Endpoint: "collector:4318"}, `Endpoint "collector:4318"`},
		{&otelexport.Config{NodeID: "n", Endpoint: "ftp://collector"}, `Endpoint "ftp://collector"`},
		{&otelexport.Config{NodeID: "n", IdleAfter: -1}, "must not be negative"},
	} {
		_, err := otelexport.New(ctx, j, j, tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := otelexport.New(ctx, nil, j, &otelexport.Config{NodeID: "n"})
	require.Error(t, err)
	// Stop without Start only shuts the exporter down.
	x, err := otelexport.New(ctx, j, j, &otelexport.Config{NodeID: "n", Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	require.NoError(t, x.Stop(ctx))
}

func TestIDsAreDerived(t *testing.T) {
	t.Parallel()
	a := otelexport.TraceID("ses_1", "turn_1")
	require.True(t, a.IsValid())
	require.Equal(t, a, otelexport.TraceID("ses_1", "turn_1"))
	require.NotEqual(t, a, otelexport.TraceID("ses_1", "turn_2"))
	require.NotEqual(t, a, otelexport.TraceID("ses_1turn_", "1"), "the ids are separated, not concatenated")
	s := otelexport.SpanID(a, "turn_1/step/1")
	require.True(t, s.IsValid())
	require.Equal(t, s, otelexport.SpanID(a, "turn_1/step/1"))
	require.NotEqual(t, s, otelexport.SpanID(otelexport.TraceID("ses_2", "turn_1"), "turn_1/step/1"))
}

// TestHorizonAndForgottenCursors checks which turn ends are exported: not
// those that ended before the exporter started, not another node's, and
// not again when a session whose cursor was forgotten comes back.
func TestHorizonAndForgottenCursors(t *testing.T) {
	t.Parallel()
	j := newJournals(t)
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	g, endpoint := newGRPCReceiver(t)

	// Before the exporter starts: a turn that ended then.
	j.add("ses_old", "node-a", start.Add(-time.Hour), lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}})
	j.turn("ses_old", "node-a", "turn_old", 1, start.Add(-time.Hour))
	for len(j.ch) > 0 {
		<-j.ch // those notifications were sent before anyone listened
	}

	ctx := context.Background()
	x, err := otelexport.New(ctx, j, j, &otelexport.Config{
		NodeID: "node-a", Endpoint: endpoint, Protocol: otelexport.ProtocolGRPC,
		IdleAfter: time.Minute, SweepInterval: 2 * time.Millisecond, MaxSessions: 2, Now: clock.Now,
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, x.Start(ctx))
	t.Cleanup(func() { require.NoError(t, x.Stop(context.Background())) })

	// ses_old's journal grows: its old turn is behind the horizon; a new
	// one is exported.
	j.turn("ses_old", "node-a", "turn_new", 2, start.Add(time.Second))
	waitFor(t, "the new turn", func() bool { return x.Stats().Exported == 1 })
	require.Equal(t, int64(1), x.Stats().Skipped)

	// Another node's turn is not this node's to export.
	j.add("ses_b", "node-b", start, lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "b", Version: 1}})
	j.turn("ses_b", "node-b", "turn_b", 1, start.Add(2*time.Second))
	waitFor(t, "node-b's turn seen", func() bool { return x.Stats().Skipped == 2 })
	require.Equal(t, int64(2), x.Stats().Sessions)

	// Idle: both cursors are forgotten.
	clock.Advance(2 * time.Minute)
	waitFor(t, "cursors forgotten", func() bool { return x.Stats().Sessions == 0 })

	// ses_old comes back: read from its start again, nothing is exported
	// twice; a third session past MaxSessions evicts the oldest cursor.
	j.add("ses_old", "", clock.Now(), lt.EventConstraintAdded, "", lt.ConstraintAddedData{Constraint: "be brief"})
	waitFor(t, "ses_old re-read", func() bool { return x.Stats().Skipped == 4 })
	j.add("ses_c", "node-a", clock.Now(), lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "c", Version: 1}})
	j.add("ses_d", "node-a", clock.Now(), lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "d", Version: 1}})
	j.turn("ses_d", "node-a", "turn_d", 1, clock.Now())
	waitFor(t, "ses_d's turn", func() bool { return x.Stats().Exported >= 2 })
	require.Equal(t, int64(2), x.Stats().Exported)
	require.Equal(t, int64(2), x.Stats().Sessions, "at most MaxSessions cursors")
	require.Equal(t, int64(4), x.Stats().Skipped)
	require.Zero(t, x.Stats().Failed)

	spans := g.byName()
	chat := spans["chat gpt-x"]
	require.NotNil(t, chat)
	finish := map[string]bool{}
	for _, v := range attrs(chat)["gen_ai.response.finish_reasons"].GetArrayValue().GetValues() {
		finish[v.GetStringValue()] = true
	}
	require.Equal(t, map[string]bool{"stop": true}, finish)
	require.Equal(t, "gpt-x-2025", str(t, chat, "gen_ai.response.model"))
	require.Equal(t, "openai", str(t, chat, "gen_ai.provider.name"))
	require.Contains(t, spans, "invoke_agent a")
	require.Contains(t, spans, "invoke_agent d")
	require.NotContains(t, spans, "invoke_agent b")
}

// TestSpansOfApprovalsRefusalsAndSubagents checks the names and attributes
// of the spans below a step, and a sub-agent still running when its turn
// ended: cut at the turn's end, and marked open.
func TestSpansOfApprovalsRefusalsAndSubagents(t *testing.T) {
	t.Parallel()
	j := newJournals(t)
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	g, endpoint := newGRPCReceiver(t)
	ctx := context.Background()
	clock := &fakeClock{now: at}
	x, err := otelexport.New(ctx, j, j, &otelexport.Config{NodeID: "node-a", Endpoint: endpoint, Protocol: otelexport.ProtocolGRPC,
		Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, x.Start(ctx))
	t.Cleanup(func() { require.NoError(t, x.Stop(context.Background())) })

	const sid, tid = "ses_1", "turn_1"
	tick := func() time.Time { at = at.Add(time.Second); return at }
	sha := strings.Repeat("a", 64)
	j.add(sid, "node-a", tick(), lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "lead", Version: 1}})
	j.add(sid, "node-a", tick(), lt.EventTurnCreated, tid, lt.TurnCreatedData{TurnID: tid, Index: 1})
	j.add(sid, "node-a", tick(), lt.EventTurnStarted, tid, lt.TurnStartedData{TurnID: tid})
	j.add(sid, "node-a", tick(), lt.EventModelRequested, tid, lt.ModelRequestedData{Step: 1, Attempt: 1, Provider: "anthropic", Model: "claude-x"})
	j.add(sid, "node-a", tick(), lt.EventModelResponded, tid, lt.ModelRespondedData{Step: 1, ToolCalls: []lt.ToolCall{
		{ID: "c0", Name: "send_email"}, {ID: "c1", Name: "deploy"}, {ID: "c2", Name: "spawn_agent"}}})
	j.add(sid, "node-a", tick(), lt.EventToolRequested, tid, lt.ToolRequestedData{Step: 1, Index: 0, CallID: "c0", Tool: "send_email", Kind: lt.CallFunction, Class: lt.EffectIrreversible, ArgumentsSHA256: sha})
	j.add(sid, "node-a", tick(), lt.EventToolRequested, tid, lt.ToolRequestedData{Step: 1, Index: 1, CallID: "c1", Tool: "deploy", Kind: lt.CallBuiltin, Class: lt.EffectIrreversible, ArgumentsSHA256: sha})
	j.add(sid, "node-a", tick(), lt.EventToolRequested, tid, lt.ToolRequestedData{Step: 1, Index: 2, CallID: "c2", Tool: "spawn_agent", Kind: lt.CallBuiltin, Class: lt.EffectRead, ArgumentsSHA256: sha})
	j.add(sid, "node-a", tick(), lt.EventToolFailed, tid, lt.ToolFailedData{Step: 1, Index: 0, CallID: "c0", Tool: "send_email", Error: "denied", Refused: lt.RefusedPolicy})
	j.add(sid, "node-a", tick(), lt.EventActionRequired, tid, lt.ActionRequiredData{Action: lt.Action{ID: "act_1", Type: lt.ActionApproval, TurnID: tid, Step: 1, CallID: "c1", Tool: "deploy"}})
	j.add(sid, "", tick(), lt.EventActionResolved, tid, lt.ActionResolvedData{ActionID: "act_1", Type: string(lt.ActionApproval), Decision: lt.Decision{Decision: lt.DecisionApprove}, ArgumentsSHA256: sha,
		Actor: &lt.Actor{KeyID: "key_bob", Name: "bob", Role: lt.RoleApprover}})
	j.add(sid, "node-a", tick(), lt.EventToolStarted, tid, lt.ToolStartedData{Step: 1, Index: 1, CallID: "c1", Tool: "deploy", EffectID: "eff_1", Class: lt.EffectIrreversible, Attempt: 1})
	j.add(sid, "node-a", tick(), lt.EventToolCompleted, tid, lt.ToolCompletedData{Step: 1, Index: 1, CallID: "c1", Tool: "deploy", EffectID: "eff_1"})
	j.add(sid, "node-a", tick(), lt.EventSubagentSpawned, tid, lt.SubagentSpawnedData{Step: 1, Index: 2, CallID: "c2", ChildID: "ses_child", Agent: lt.AgentRef{Name: "helper", Version: 1}})
	j.add(sid, "node-a", tick(), lt.EventToolCompleted, tid, lt.ToolCompletedData{Step: 1, Index: 2, CallID: "c2", Tool: "spawn_agent"})
	j.add(sid, "node-a", tick(), lt.EventModelRequested, tid, lt.ModelRequestedData{Step: 2, Attempt: 1, Provider: "anthropic", Model: "claude-x"})
	j.add(sid, "node-a", tick(), lt.EventModelResponded, tid, lt.ModelRespondedData{Step: 2, Text: "done"})
	turnEnd := tick()
	j.add(sid, "node-a", turnEnd, lt.EventTurnCompleted, tid, lt.TurnCompletedData{TurnID: tid})
	waitFor(t, "the export", func() bool { return x.Stats().Exported == 1 })

	spans := g.byName()
	email := spans["execute_tool send_email"]
	require.NotNil(t, email)
	require.Equal(t, tracepb.Status_STATUS_CODE_ERROR, email.Status.GetCode())
	require.Equal(t, "denied", email.Status.GetMessage())
	require.Equal(t, lt.RefusedPolicy, str(t, email, "error.type"))
	require.Equal(t, "function", str(t, email, "gen_ai.tool.type"))
	deploy := spans["execute_tool deploy"]
	require.Equal(t, "irreversible", str(t, deploy, "longhaul.effect.class"))
	require.Equal(t, "eff_1", str(t, deploy, "longhaul.effect.id"))
	act := spans["action approval"]
	require.NotNil(t, act)
	require.Equal(t, deploy.SpanId, act.ParentSpanId)
	require.Equal(t, lt.DecisionApprove, str(t, act, "longhaul.action.decision"))
	require.Equal(t, "bob", str(t, act, "longhaul.action.decided_by.name"))
	require.Equal(t, "approver", str(t, act, "longhaul.action.decided_by.role"))
	require.Equal(t, "key_bob", str(t, act, "longhaul.action.decided_by.key_id"))
	sub := spans["invoke_agent helper"]
	require.NotNil(t, sub)
	require.Equal(t, spans["execute_tool spawn_agent"].SpanId, sub.ParentSpanId)
	require.Equal(t, "invoke_agent", str(t, sub, "gen_ai.operation.name"))
	require.Equal(t, "ses_child", str(t, sub, "gen_ai.conversation.id"))
	require.True(t, attrs(sub)["longhaul.span.open"].GetBoolValue())
	require.Equal(t, uint64(turnEnd.UnixNano()), sub.EndTimeUnixNano, "a sub-agent still running is cut at its turn's end")
	root := spans["invoke_agent lead"]
	require.NotNil(t, root)
	require.Equal(t, otelexport.TraceID(sid, tid).String(), hex.EncodeToString(root.TraceId))
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.spans, 10, "the turn, 2 steps, 2 model calls, 3 tool calls, the action and the sub-agent")
}
