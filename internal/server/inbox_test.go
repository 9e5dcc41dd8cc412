package server_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// functionSession is a create-session body whose scripted model calls the
// application function lookup(id): the session waits on a function_call
// action until the application answers.
func functionSession(customer string) string {
	return `{
	  "agent_spec": {
	    "model": {"provider": "scripted", "script": [
	      {"tool_calls": [{"name": "lookup", "arguments": {"id": ` + strconv.Quote(customer) + `}}]},
	      {"text": "looked up"}
	    ]},
	    "tools": [{"name": "lookup", "type": "function", "effect": "read",
	               "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}]
	  },
	  "input": "Look up ` + customer + `",
	  "budget": {"max_cost_usd": 5, "soft_cost_usd": 2, "max_tool_calls": 50}
	}`
}

// startFunctionSession creates a function session and waits for its pending
// action.
func (h *harness) startFunctionSession(customer string) (lt.Session, lt.Action) {
	h.t.Helper()
	r := h.post("/v1/sessions", functionSession(customer))
	require.Equal(h.t, http.StatusCreated, r.status, "body: %s", r.body)
	sess := decode[lt.Session](h.t, r)
	sess = h.waitStatus(sess.ID, lt.SessionRequiresAction)
	require.Len(h.t, sess.RequiredActions, 1)
	return sess, sess.RequiredActions[0]
}

func actionIDs(actions []lt.Action) []string {
	ids := make([]string, len(actions))
	for i, a := range actions {
		ids[i] = a.ID
	}
	return ids
}

func TestInboxListsActionsAcrossSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s1, a1 := h.startFunctionSession("c-1")
	s2, a2 := h.startFunctionSession("c-2")
	s3, a3 := h.startFunctionSession("c-3")

	list := func(query string) lt.List[lt.Action] {
		t.Helper()
		r := h.get("/v1/actions" + query)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		return decode[lt.List[lt.Action]](t, r)
	}

	// Oldest first, every field of the action as the session shows it.
	all := list("?status=pending")
	require.Equal(t, []string{a1.ID, a2.ID, a3.ID}, actionIDs(all.Data))
	require.Nil(t, all.NextCursor)
	require.Equal(t, a1, all.Data[0])
	require.Equal(t, s2.ID, all.Data[1].SessionID)
	require.Equal(t, lt.ActionFunctionCall, all.Data[2].Type)
	require.JSONEq(t, `{"id":"c-3"}`, string(all.Data[2].Arguments))
	require.Len(t, all.Data[2].ArgumentsSHA256, 64)

	require.Equal(t, []string{a1.ID, a2.ID, a3.ID}, actionIDs(list("?type=function_call").Data))
	require.Empty(t, list("?type=approval").Data)
	require.Equal(t, []string{a2.ID}, actionIDs(list("?session_id="+s2.ID).Data))

	// Pages of one, following next_cursor, cover the list exactly once.
	var paged []string
	q := "?status=pending&limit=1"
	for {
		page := list(q)
		require.LessOrEqual(t, len(page.Data), 1)
		paged = append(paged, actionIDs(page.Data)...)
		if page.NextCursor == nil {
			break
		}
		q = "?status=pending&limit=1&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	require.Equal(t, []string{a1.ID, a2.ID, a3.ID}, paged)

	// Answering one moves it from pending to resolved; the others stay.
	r := h.post("/v1/sessions/"+s1.ID+"/actions/"+a1.ID, `{"output": {"name": "ACME"}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, []string{a2.ID, a3.ID}, actionIDs(list("?status=pending").Data))
	require.Equal(t, []string{a1.ID}, actionIDs(list("?status=resolved").Data))
	require.Equal(t, []string{a1.ID, a2.ID, a3.ID}, actionIDs(list("").Data))
	require.Equal(t, []string{a3.ID}, actionIDs(list("?status=pending&session_id="+s3.ID).Data))
}

func TestInboxRefusesBadFilters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for _, tc := range []struct {
		query  string
		status int
		code   string
		field  string
	}{
		{"?status=waiting", http.StatusBadRequest, lt.CodeInvalidRequest, "status"},
		{"?type=email", http.StatusBadRequest, lt.CodeInvalidRequest, "type"},
		{"?type=approval&type=input", http.StatusBadRequest, lt.CodeInvalidRequest, "type"},
		{"?limit=0", http.StatusBadRequest, lt.CodeInvalidRequest, "limit"},
		{"?limit=501", http.StatusBadRequest, lt.CodeInvalidRequest, "limit"},
		{"?limit=ten", http.StatusBadRequest, lt.CodeInvalidRequest, "limit"},
		{"?cursor=not-a-cursor", http.StatusBadRequest, lt.CodeInvalidRequest, "cursor"},
		{"?cursor=" + url.QueryEscape("eyJ0IjoxfQ"), http.StatusBadRequest, lt.CodeInvalidRequest, "cursor"},
		{"?session_id=ses_unknown", http.StatusNotFound, lt.CodeNotFound, ""},
	} {
		requireError(t, h.get("/v1/actions"+tc.query), tc.status, tc.code, tc.field)
	}
}

func TestGetActionByID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sess, act := h.startFunctionSession("c-9")

	r := h.get("/v1/actions/" + act.ID)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := decode[lt.Action](t, r)
	require.Equal(t, act, got)
	require.Equal(t, sess.ID, got.SessionID, "the action names its session, so a client can decide it")

	r = h.post("/v1/sessions/"+sess.ID+"/actions/"+act.ID, `{"error": "no such customer"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got = decode[lt.Action](t, h.get("/v1/actions/"+act.ID))
	require.Equal(t, lt.ActionResolved, got.Status, "a resolved action is still shown, with its resolution")
	require.NotNil(t, got.ResolvedAt)
	require.JSONEq(t, `{"error": "no such customer"}`, string(got.Resolution))

	e := requireError(t, h.get("/v1/actions/act_missing"), http.StatusNotFound, lt.CodeNotFound, "")
	require.Contains(t, e.Message, "act_missing")
}

func TestUpdateBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sess, _ := h.startFunctionSession("c-4")
	patch := func(body string) *response {
		return h.do(http.MethodPatch, "/v1/sessions/"+sess.ID+"/budget", []byte(body), nil)
	}

	// Only the named limits change; 0 removes one.
	r := patch(`{"max_cost_usd": 10, "soft_cost_usd": 5, "max_tool_calls": 0}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := decode[lt.Session](t, r)
	require.Equal(t, sess.ID, got.ID)
	require.Equal(t, lt.Budget{MaxCostUSD: 10, SoftCostUSD: 5}, got.Budget)
	require.Equal(t, lt.Budget{MaxCostUSD: 10, SoftCostUSD: 5}, decode[lt.Session](t, h.get("/v1/sessions/"+sess.ID)).Budget)

	r = patch(`{"max_tokens": 1000}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, lt.Budget{MaxCostUSD: 10, SoftCostUSD: 5, MaxTokens: 1000}, decode[lt.Session](t, r).Budget)

	// Strict decoding: an unknown field or a wrong type is a 400 naming it,
	// and nothing changes.
	e := requireError(t, patch(`{"max_cost": 10}`), http.StatusBadRequest, lt.CodeInvalidRequest, "max_cost")
	require.Contains(t, e.Message, `unknown field "max_cost"`)
	requireError(t, patch(`{"max_tokens": "lots"}`), http.StatusBadRequest, lt.CodeInvalidRequest, "max_tokens")
	requireError(t, patch(``), http.StatusBadRequest, lt.CodeInvalidRequest, "")
	// The merged budget is validated: a soft limit above its max is refused.
	e = requireError(t, patch(`{"soft_cost_usd": 20}`), http.StatusBadRequest, lt.CodeInvalidRequest, "soft_cost_usd")
	require.Contains(t, e.Message, "max_cost_usd")
	require.Equal(t, lt.Budget{MaxCostUSD: 10, SoftCostUSD: 5, MaxTokens: 1000}, decode[lt.Session](t, h.get("/v1/sessions/"+sess.ID)).Budget)

	requireError(t, h.do(http.MethodPatch, "/v1/sessions/ses_missing/budget", []byte(`{"max_tokens": 5}`), nil),
		http.StatusNotFound, lt.CodeNotFound, "")
	r = h.get("/v1/sessions/" + sess.ID + "/budget")
	requireError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "")
	require.Contains(t, r.header.Get("Allow"), http.MethodPatch)
}
