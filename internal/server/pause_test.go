package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// askingSession is a create-session body whose agent asks a person a
// question: the session parks in requires_action, held by no worker.
const askingSession = `{
  "agent_spec": {
    "model": {"provider": "scripted", "script": [
      {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]},
      {"text": "done"}
    ]},
    "tools": [{"name": "ask_human"}]
  },
  "input": "go"
}`

// TestPauseAndResumeOverHTTP: pause and resume through the API, with the
// statuses, the list filter, the journal, idempotency and the errors.
func TestPauseAndResumeOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	r := h.post("/v1/sessions", askingSession)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	s := h.waitStatus(decode[lt.Session](t, r).ID, lt.SessionRequiresAction)
	path := "/v1/sessions/" + s.ID

	// Nothing to resume yet.
	requireError(t, h.post(path+"/resume", `{}`), http.StatusConflict, "conflict", "")

	// A parked session is paused at once; the reason is shown.
	r = h.post(path+"/pause", `{"reason":"lunch"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	p := decode[lt.Session](t, r)
	require.Equal(t, lt.SessionPaused, p.Status)
	require.False(t, p.PauseRequested)
	require.Equal(t, "lunch", p.PauseReason)
	require.NotNil(t, p.PausedAt)
	require.Len(t, p.RequiredActions, 1, "the action stays pending")

	// Listed under ?status=paused, and nowhere else.
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions?status=paused"))
	require.Len(t, list.Data, 1)
	require.Equal(t, s.ID, list.Data[0].ID)
	require.Empty(t, decode[lt.List[lt.Session]](t, h.get("/v1/sessions?status=requires_action")).Data)

	// Pausing again (without a body, as curl -X POST sends) changes nothing.
	r = h.do(http.MethodPost, path+"/pause", nil, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, lt.SessionPaused, decode[lt.Session](t, r).Status)

	// An Idempotency-Key replays the first answer.
	key := map[string]string{"Idempotency-Key": "resume-1"}
	r = h.do(http.MethodPost, path+"/resume", []byte(`{}`), key)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	resumed := decode[lt.Session](t, r)
	require.Equal(t, lt.SessionRequiresAction, resumed.Status, "back to waiting for the person")
	require.Nil(t, resumed.PausedAt)
	again := h.do(http.MethodPost, path+"/resume", []byte(`{}`), key)
	require.Equal(t, http.StatusOK, again.status, "a replay, not a 409: %s", again.body)
	require.JSONEq(t, string(r.body), string(again.body))
	requireError(t, h.post(path+"/resume", `{}`), http.StatusConflict, "conflict", "")

	var types []string
	for _, raw := range h.allEvents(s.ID, 100) {
		var ev lt.Event
		require.NoError(t, json.Unmarshal(raw, &ev))
		types = append(types, ev.Type)
	}
	require.Subset(t, types, []string{lt.EventSessionPaused, lt.EventSessionResumed})
	require.NotContains(t, types, lt.EventSessionPauseRequested, "it took effect at once")

	// Bad bodies name the field; unknown sessions are 404s.
	requireError(t, h.post(path+"/pause", `{"reason":5}`), http.StatusBadRequest, "invalid_request", "reason")
	requireError(t, h.post(path+"/pause", `{"why":"x"}`), http.StatusBadRequest, "invalid_request", "why")
	requireError(t, h.post(path+"/resume", `{"now":true}`), http.StatusBadRequest, "invalid_request", "now")
	requireError(t, h.post("/v1/sessions/ses_nope/pause", `{}`), http.StatusNotFound, "not_found", "")
	requireError(t, h.post("/v1/sessions/ses_nope/resume", `{}`), http.StatusNotFound, "not_found", "")
	requireError(t, h.do(http.MethodPost, path+"/pause", []byte(`{}`), map[string]string{"Content-Type": "text/plain"}),
		http.StatusForbidden, "forbidden", "Content-Type")

	// A cancelled session cannot be paused.
	require.Equal(t, http.StatusOK, h.post(path+"/cancel", `{}`).status)
	h.waitStatus(s.ID, lt.SessionCancelled)
	requireError(t, h.post(path+"/pause", `{}`), http.StatusConflict, "conflict", "")
}
