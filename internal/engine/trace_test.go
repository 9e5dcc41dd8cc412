package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestSessionTrace runs a session whose model fails once, whose payloads
// are large enough to be stored as blobs, and checks the trace derived from
// its journal against the session's own accounts.
func TestSessionTrace(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	big := strings.Repeat("x", 100<<10)
	args, err := json.Marshal(map[string]string{"path": "big.txt", "content": big})
	require.NoError(t, err)
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"error":{"status":500}},
		 {"tool_calls":[{"name":"write_file","arguments":`+string(args)+`}],"usage":{"input_tokens":700,"output_tokens":30}},
		 {"text":"done","usage":{"input_tokens":800,"output_tokens":5}}]`,
			lt.ToolSpec{Name: "write_file"}),
		Input: "write it",
	})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	tr, err := h.eng.SessionTrace(ctx, s.ID, false)
	require.NoError(t, err)
	require.Equal(t, s.ID, tr.SessionID)
	require.Equal(t, s.Agent, tr.Agent)
	require.Equal(t, s.LastEventSeq, tr.LastEventSeq)
	require.Equal(t, s.Usage.InputTokens, tr.Usage.InputTokens)
	require.Equal(t, s.Usage.OutputTokens, tr.Usage.OutputTokens)
	require.Equal(t, s.Usage.ModelCalls, tr.Usage.ModelCalls)
	require.Equal(t, s.Usage.ToolCalls, tr.Usage.ToolCalls)

	require.Len(t, tr.Spans, 1)
	turn := tr.Spans[0]
	require.Equal(t, s.CurrentTurnID, turn.ID)
	require.Equal(t, lt.SpanTurn, turn.Kind)
	require.Equal(t, lt.SpanOK, turn.Status)
	require.NotNil(t, turn.End)
	turns, err := h.eng.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, turns[0].Usage.InputTokens, turn.Usage.InputTokens)
	require.Equal(t, turns[0].Usage.ModelCalls, turn.Usage.ModelCalls)
	require.Equal(t, *turns[0].StartedAt, turn.Start)
	require.Equal(t, *turns[0].CompletedAt, *turn.End)

	require.Len(t, turn.Children, 2, "two steps")
	step1 := turn.Children[0]
	require.Len(t, step1.Children, 3, "a failed model call, the one that answered, the write")
	require.Equal(t, lt.SpanError, step1.Children[0].Status)
	require.True(t, step1.Children[0].Attributes.Retried)
	// model.responded and tool.requested of the write were stored as blobs:
	// the trace read them back.
	require.Equal(t, int64(700), step1.Children[1].Usage.InputTokens)
	write := step1.Children[2]
	require.Equal(t, lt.SpanToolCall, write.Kind)
	require.Equal(t, "write_file", write.Attributes.Tool)
	require.Equal(t, lt.SpanOK, write.Status)
	require.NotEmpty(t, write.Attributes.EffectID)
	require.Equal(t, lt.EffectIdempotent, write.Attributes.EffectClass)
	require.Equal(t, int64(800), turn.Children[1].Usage.InputTokens)

	// Deterministic: the same journal gives the same trace.
	again, err := h.eng.SessionTrace(ctx, s.ID, true)
	require.NoError(t, err)
	a, _ := json.Marshal(tr)
	b, _ := json.Marshal(again)
	require.JSONEq(t, string(a), string(b))

	_, err = h.eng.SessionTrace(ctx, "ses_missing", false)
	var ae *apierror.Error
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, lt.CodeNotFound, ae.Code)
	require.True(t, errors.Is(err, store.ErrNotFound))
}

// TestSessionTraceWithSubagents: a session spawns a sub-agent and waits for
// it; the trace shows the child under the spawn_agent call with its
// reported usage, and with include=subagents the child's own turns.
func TestSessionTraceWithSubagents(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	child := `{"model": {"provider": "scripted", "script": [{"text": "child done", "usage": {"input_tokens": 50, "output_tokens": 5}}]},
	  "instructions": "Help."}`
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[
		  {"tool_calls": [{"name": "spawn_agent", "arguments": {"agent_spec": `+child+`, "input": "help"}}], "usage": {"input_tokens": 10, "output_tokens": 1}},
		  {"tool_calls": [{"name": "wait_agents", "arguments": {}}], "usage": {"input_tokens": 10, "output_tokens": 1}},
		  {"text": "all done", "usage": {"input_tokens": 10, "output_tokens": 1}}]`,
			lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}),
		Input: "delegate",
	})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", s.StopReason)

	tr, err := h.eng.SessionTrace(ctx, s.ID, false)
	require.NoError(t, err)
	require.Equal(t, s.Usage.InputTokens, tr.Usage.InputTokens, "the trace's total is the session's, children included")
	require.Equal(t, s.Usage.ModelCalls, tr.Usage.ModelCalls)
	turns, err := h.eng.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, turns[0].Usage.InputTokens, tr.Spans[0].Usage.InputTokens)

	var sub *lt.Span
	var walk func([]lt.Span, *lt.Span)
	walk = func(spans []lt.Span, parent *lt.Span) {
		for i := range spans {
			if spans[i].Kind == lt.SpanSubagent {
				sub = &spans[i]
				require.Equal(t, "spawn_agent", parent.Attributes.Tool, "a sub-agent sits under the call that spawned it")
			}
			walk(spans[i].Children, &spans[i])
		}
	}
	walk(tr.Spans, nil)
	require.NotNil(t, sub)
	require.Equal(t, lt.SpanOK, sub.Status)
	require.NotEmpty(t, sub.Attributes.ChildSessionID)
	require.Equal(t, int64(50), sub.Usage.InputTokens)
	require.Empty(t, sub.Children)

	nested, err := h.eng.SessionTrace(ctx, s.ID, true)
	require.NoError(t, err)
	sub = nil
	walk(nested.Spans, nil)
	require.NotNil(t, sub)
	require.Len(t, sub.Children, 1, "the child's one turn")
	require.Equal(t, lt.SpanTurn, sub.Children[0].Kind)
	require.Equal(t, sub.ID, *sub.Children[0].ParentID)
	require.Equal(t, int64(50), sub.Children[0].Usage.InputTokens)
	require.Equal(t, tr.Usage, nested.Usage, "nesting adds no usage: the report already counted it")
}
