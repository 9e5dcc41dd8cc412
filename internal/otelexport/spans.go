package otelexport

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TraceID is the OpenTelemetry trace id of one turn of one session: the
// first 16 bytes of a SHA-256 of both ids, so every export of the turn, by
// any node, has the same.
func TraceID(sessionID, turnID string) trace.TraceID {
	sum := sha256.Sum256([]byte("longhaul/trace\x00" + sessionID + "\x00" + turnID))
	var id trace.TraceID
	copy(id[:], sum[:16])
	if !id.IsValid() {
		id[15] = 1 // an all-zero id is invalid; a hash of zeros is not worth a retry
	}
	return id
}

// SpanID is the OpenTelemetry span id of the span with Longhaul id spanID
// in the trace tid.
func SpanID(tid trace.TraceID, spanID string) trace.SpanID {
	sum := sha256.Sum256(append(tid[:], []byte("\x00"+spanID)...))
	var id trace.SpanID
	copy(id[:], sum[:8])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// idKey carries the ids the next span must get to the IDGenerator: the SDK
// asks it with the context given to Start.
type idKey struct{}

type spanIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// derivedIDs is the SDK's IDGenerator: the ids in the context, else random
// ones (never used by this package, but an IDGenerator must always answer).
type derivedIDs struct{}

func (derivedIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idKey{}).(spanIDs); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	var s trace.SpanID
	_, _ = rand.Read(t[:]) // crypto/rand.Read never fails (Go 1.24+)
	_, _ = rand.Read(s[:])
	return t, s
}

func (derivedIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idKey{}).(spanIDs); ok {
		return v.span
	}
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}

// collector is the SDK's span processor: it keeps the spans that ended so
// the exporter can send one turn's spans in one synchronous call and learn
// whether they arrived.
type collector struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (c *collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	c.spans = append(c.spans, s)
	c.mu.Unlock()
}

func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

func (c *collector) take() []sdktrace.ReadOnlySpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.spans
	c.spans = nil
	return out
}

// GenAI semantic convention names (OpenTelemetry semantic conventions,
// gen-ai spans).
const (
	opInvokeAgent = "invoke_agent"
	opChat        = "chat"
	opExecuteTool = "execute_tool"

	attrOperation     = "gen_ai.operation.name"
	attrAgentName     = "gen_ai.agent.name"
	attrConversation  = "gen_ai.conversation.id"
	attrProvider      = "gen_ai.provider.name"
	attrRequestModel  = "gen_ai.request.model"
	attrResponseModel = "gen_ai.response.model"
	attrFinish        = "gen_ai.response.finish_reasons"
	attrInputTokens   = "gen_ai.usage.input_tokens"
	attrOutputTokens  = "gen_ai.usage.output_tokens"
	attrToolName      = "gen_ai.tool.name"
	attrToolCallID    = "gen_ai.tool.call.id"
	attrToolType      = "gen_ai.tool.type"
	attrErrorType     = "error.type"
)

// record creates the OpenTelemetry spans of one turn of tr with tracer;
// they end (and reach the collector) children first.
func record(tracer trace.Tracer, tr *lt.Trace, turn lt.Span) {
	tid := TraceID(tr.SessionID, turn.ID)
	end := turn.Start
	if turn.End != nil {
		end = *turn.End
	}
	emit(context.Background(), tracer, tr, tid, turn.ID, end, turn, true)
}

func emit(parent context.Context, tracer trace.Tracer, tr *lt.Trace, tid trace.TraceID, turnID string, turnEnd time.Time, sp lt.Span, root bool) {
	ctx := context.WithValue(parent, idKey{}, spanIDs{trace: tid, span: SpanID(tid, sp.ID)})
	name, kind, attrs := describe(tr, turnID, sp)
	opts := []trace.SpanStartOption{trace.WithTimestamp(sp.Start), trace.WithSpanKind(kind), trace.WithAttributes(attrs...)}
	if root {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := tracer.Start(ctx, name, opts...)
	for _, k := range sp.Children {
		emit(ctx, tracer, tr, tid, turnID, turnEnd, k, false)
	}
	if sp.Status == lt.SpanError {
		span.SetStatus(codes.Error, sp.Error)
	}
	end := turnEnd
	if sp.End != nil {
		end = *sp.End
	} else {
		// Still open when its turn ended (a sub-agent runs on): it is cut
		// at the turn's end and says so.
		span.SetAttributes(attribute.Bool("longhaul.span.open", true))
	}
	if end.Before(sp.Start) {
		end = sp.Start
	}
	span.End(trace.WithTimestamp(end))
}

// describe maps a Longhaul span to an OpenTelemetry name, kind and
// attributes.
func describe(tr *lt.Trace, turnID string, sp lt.Span) (string, trace.SpanKind, []attribute.KeyValue) {
	a := sp.Attributes
	attrs := []attribute.KeyValue{
		attribute.String("longhaul.session.id", tr.SessionID),
		attribute.String("longhaul.turn.id", turnID),
		attribute.String("longhaul.span.id", sp.ID),
		attribute.String("longhaul.span.kind", string(sp.Kind)),
		attribute.String("longhaul.status", string(sp.Status)),
	}
	if a.Step > 0 {
		attrs = append(attrs, attribute.Int("longhaul.step", a.Step))
	}
	if u := sp.Usage; u != nil {
		attrs = append(attrs,
			attribute.Int64(attrInputTokens, u.InputTokens),
			attribute.Int64(attrOutputTokens, u.OutputTokens),
			attribute.Float64("longhaul.cost_usd", u.CostUSD),
		)
		if u.CachedInputTokens > 0 {
			attrs = append(attrs, attribute.Int64("longhaul.usage.cached_input_tokens", u.CachedInputTokens))
		}
		if u.ReasoningTokens > 0 {
			attrs = append(attrs, attribute.Int64("longhaul.usage.reasoning_tokens", u.ReasoningTokens))
		}
		if u.Estimated {
			// The token counts are estimates: the provider reported none.
			attrs = append(attrs, attribute.Bool("longhaul.usage.estimated", true))
		}
		if sp.Kind != lt.SpanModelCall {
			attrs = append(attrs, attribute.Int64("longhaul.usage.model_calls", u.ModelCalls), attribute.Int64("longhaul.usage.tool_calls", u.ToolCalls))
		}
	}
	name, kind := sp.Name, trace.SpanKindInternal
	switch sp.Kind {
	case lt.SpanTurn:
		name = opInvokeAgent + " " + tr.Agent.Name
		attrs = append(attrs,
			attribute.String(attrOperation, opInvokeAgent),
			attribute.String(attrAgentName, tr.Agent.Name),
			attribute.String(attrConversation, tr.SessionID),
			attribute.Int("longhaul.agent.version", tr.Agent.Version),
			attribute.Int("longhaul.turn.index", a.TurnIndex),
		)
		if a.StopReason != "" {
			attrs = append(attrs, attribute.String("longhaul.stop_reason", a.StopReason))
		}
	case lt.SpanModelCall:
		kind = trace.SpanKindClient
		name = opChat + " " + a.Model
		attrs = append(attrs,
			attribute.String(attrOperation, opChat),
			attribute.String(attrProvider, a.Provider),
			attribute.String(attrRequestModel, a.Model),
			attribute.Int("longhaul.model.attempt", a.Attempt),
		)
		if a.ResponseModel != "" {
			attrs = append(attrs, attribute.String(attrResponseModel, a.ResponseModel))
		}
		if a.StopReason != "" {
			attrs = append(attrs, attribute.StringSlice(attrFinish, []string{a.StopReason}))
		}
		if a.Purpose != "" {
			attrs = append(attrs, attribute.String("longhaul.model.purpose", a.Purpose))
		}
		if a.ErrorKind != "" {
			attrs = append(attrs, attribute.String(attrErrorType, a.ErrorKind), attribute.Bool("longhaul.model.retried", a.Retried))
		}
	case lt.SpanToolCall:
		name = opExecuteTool + " " + a.Tool
		toolType := "extension" // run by the agent's side: the engine, or an MCP server
		if a.CallKind == "function" {
			toolType = "function" // answered by the application
		}
		attrs = append(attrs,
			attribute.String(attrOperation, opExecuteTool),
			attribute.String(attrToolName, a.Tool),
			attribute.String(attrToolCallID, a.CallID),
			attribute.String(attrToolType, toolType),
			attribute.Int("longhaul.tool.attempts", a.Attempts),
		)
		if a.EffectClass != "" {
			attrs = append(attrs, attribute.String("longhaul.effect.class", string(a.EffectClass)))
		}
		if a.EffectID != "" {
			attrs = append(attrs, attribute.String("longhaul.effect.id", a.EffectID))
		}
		if a.EffectStatus != "" {
			attrs = append(attrs, attribute.String("longhaul.effect.status", string(a.EffectStatus)))
		}
		if a.Policy != "" {
			attrs = append(attrs, attribute.String("longhaul.policy.decision", string(a.Policy)))
		}
		if a.Refused != "" {
			attrs = append(attrs, attribute.String("longhaul.tool.refused", a.Refused))
		}
		if sp.Status == lt.SpanError {
			errType := "tool_error"
			if a.Refused != "" {
				errType = a.Refused
			}
			attrs = append(attrs, attribute.String(attrErrorType, errType))
		}
	case lt.SpanSubagent:
		child := ""
		if a.Agent != nil {
			child = a.Agent.Name
		}
		name = opInvokeAgent + " " + child
		attrs = append(attrs,
			attribute.String(attrOperation, opInvokeAgent),
			attribute.String(attrAgentName, child),
			attribute.String(attrConversation, a.ChildSessionID),
			attribute.String("longhaul.child_session.id", a.ChildSessionID),
		)
		if a.ChildStatus != "" {
			attrs = append(attrs, attribute.String("longhaul.child.status", string(a.ChildStatus)))
		}
	case lt.SpanAction:
		attrs = append(attrs, attribute.String("longhaul.action.id", a.ActionID), attribute.String("longhaul.action.type", string(a.ActionType)))
		if a.Decision != "" {
			attrs = append(attrs, attribute.String("longhaul.action.decision", a.Decision))
		}
		if by := a.DecidedBy; by != nil {
			attrs = append(attrs, attribute.String("longhaul.action.decided_by.name", by.Name),
				attribute.String("longhaul.action.decided_by.role", string(by.Role)))
			if by.KeyID != "" {
				attrs = append(attrs, attribute.String("longhaul.action.decided_by.key_id", by.KeyID))
			}
		}
	case lt.SpanWait:
		attrs = append(attrs, attribute.String("longhaul.wait.kind", a.WaitKind))
		if a.SignalName != "" {
			attrs = append(attrs, attribute.String("longhaul.wait.signal", a.SignalName))
		}
	case lt.SpanAttempt:
		attrs = append(attrs, attribute.Int("longhaul.tool.attempt", a.Attempt), attribute.String(attrToolName, a.Tool))
	}
	if a.CallID != "" && sp.Kind != lt.SpanToolCall {
		attrs = append(attrs, attribute.String("longhaul.call.id", a.CallID))
	}
	if a.Index != nil {
		attrs = append(attrs, attribute.Int("longhaul.call.index", *a.Index))
	}
	return name, kind, attrs
}
