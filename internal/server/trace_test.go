package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestSessionTrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.createSession("write notes")
	s = h.waitStatus(s.ID, lt.SessionIdle)

	r := h.get("/v1/sessions/" + s.ID + "/trace")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	tr := decode[lt.Trace](t, r)
	require.Equal(t, s.ID, tr.SessionID)
	require.Equal(t, s.Agent, tr.Agent)
	require.Equal(t, s.LastEventSeq, tr.LastEventSeq)
	require.Equal(t, s.Usage.ModelCalls, tr.Usage.ModelCalls)
	require.Equal(t, s.Usage.ToolCalls, tr.Usage.ToolCalls)
	require.Equal(t, s.Usage.InputTokens, tr.Usage.InputTokens)

	require.Len(t, tr.Spans, 1)
	turn := tr.Spans[0]
	require.Equal(t, s.CurrentTurnID, turn.ID)
	require.Equal(t, "turn 1", turn.Name)
	require.Equal(t, lt.SpanOK, turn.Status)
	require.Nil(t, turn.ParentID)
	// Two steps (write_file, then finish), then the acceptance check of the
	// answer against the session's criteria: a call made for the turn.
	require.Len(t, turn.Children, 3)
	verify := turn.Children[2]
	require.Equal(t, lt.SpanModelCall, verify.Kind)
	require.Equal(t, "verification", verify.Attributes.Purpose)
	require.NotNil(t, verify.Attributes.AcceptanceMet)
	var tools []string
	for i, step := range turn.Children[:2] {
		require.Equal(t, lt.SpanStep, step.Kind)
		require.Equal(t, i+1, step.Attributes.Step)
		require.Equal(t, turn.ID, *step.ParentID)
		require.NotNil(t, step.End)
		require.GreaterOrEqual(t, step.DurationMS, int64(0))
		require.Equal(t, lt.SpanModelCall, step.Children[0].Kind)
		require.Equal(t, "scripted", step.Children[0].Attributes.Provider)
		require.Equal(t, "demo", step.Children[0].Attributes.Model)
		require.Equal(t, int64(1), step.Usage.ModelCalls)
		for _, c := range step.Children[1:] {
			require.Equal(t, lt.SpanToolCall, c.Kind)
			require.Equal(t, step.ID, *c.ParentID)
			require.Equal(t, lt.SpanOK, c.Status)
			tools = append(tools, c.Attributes.Tool)
		}
	}
	require.Equal(t, []string{"write_file", "finish"}, tools)

	// include=subagents: the same tree for a session without any.
	r = h.get("/v1/sessions/" + s.ID + "/trace?include=subagents")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, tr, decode[lt.Trace](t, r))

	requireError(t, h.get("/v1/sessions/"+s.ID+"/trace?include=everything"), http.StatusBadRequest, lt.CodeInvalidRequest, "include")
	requireError(t, h.get("/v1/sessions/"+s.ID+"/trace?include=subagents&include=subagents"), http.StatusBadRequest, lt.CodeInvalidRequest, "include")
	requireError(t, h.get("/v1/sessions/ses_nope/trace"), http.StatusNotFound, lt.CodeNotFound, "")
	r = h.do(http.MethodPost, "/v1/sessions/"+s.ID+"/trace", []byte(`{}`), nil)
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
}
