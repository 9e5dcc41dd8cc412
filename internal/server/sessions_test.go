package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestCreateSessionRunsToIdle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})

	r := h.post("/v1/sessions", scriptedSession("Write notes"))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.NotEmpty(t, r.header.Get("X-Request-Id"))

	// The session shape of API.md: nulls and empty lists are explicit.
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &raw))
	for _, k := range []string{"parent_id", "last_checkpoint", "stop_reason", "review"} {
		require.JSONEq(t, "null", string(raw[k]), k)
	}
	require.JSONEq(t, "[]", string(raw["required_actions"]))

	s := decode[lt.Session](t, r)
	require.True(t, strings.HasPrefix(s.ID, "ses_"), s.ID)
	require.True(t, strings.HasPrefix(s.CurrentTurnID, "turn_"), s.CurrentTurnID)
	require.Equal(t, lt.SessionQueued, s.Status)
	require.Equal(t, "notes exist", s.Goal)
	require.Equal(t, []string{"be brief"}, s.Constraints)
	require.Equal(t, []string{"notes.md exists"}, s.AcceptanceCriteria)
	require.InDelta(t, 5.0, s.Budget.MaxCostUSD, 0)
	require.Positive(t, s.LastEventSeq)
	require.JSONEq(t, `{"ticket":"OPS-12"}`, string(s.Metadata))

	done := h.waitStatus(s.ID, lt.SessionIdle)
	require.Positive(t, done.Usage.ModelCalls)
	require.Greater(t, done.LastEventSeq, s.LastEventSeq)

	// The turn, its artifact, the effect ledger.
	turns := decode[lt.List[lt.Turn]](t, h.get("/v1/sessions/"+s.ID+"/turns"))
	require.Len(t, turns.Data, 1)
	require.Nil(t, turns.NextCursor)
	require.Equal(t, lt.TurnCompleted, turns.Data[0].Status)
	turn := decode[lt.Turn](t, h.get("/v1/sessions/"+s.ID+"/turns/"+s.CurrentTurnID))
	require.Equal(t, turns.Data[0], turn)

	effects := decode[lt.List[lt.Effect]](t, h.get("/v1/sessions/"+s.ID+"/effects"))
	require.NotEmpty(t, effects.Data)
	require.Equal(t, "write_file", effects.Data[0].Tool)

	actions := decode[lt.List[lt.Action]](t, h.get("/v1/sessions/"+s.ID+"/actions?status=pending"))
	require.Empty(t, actions.Data)
	require.NotNil(t, actions.Data, "an empty list is [] not null")
	decode[lt.List[lt.Checkpoint]](t, h.get("/v1/sessions/"+s.ID+"/checkpoints"))

	arts := decode[lt.List[lt.Artifact]](t, h.get("/v1/sessions/"+s.ID+"/artifacts"))
	require.Len(t, arts.Data, 1)
	art := arts.Data[0]
	require.Equal(t, "notes.md", art.Name)
	require.Equal(t, art, decode[lt.Artifact](t, h.get("/v1/artifacts/"+art.ID)))

	content := h.get("/v1/artifacts/" + art.ID + "/content")
	require.Equal(t, http.StatusOK, content.status)
	require.Equal(t, "# Notes\n\nhello", string(content.body))
	require.Equal(t, art.ContentType, content.header.Get("Content-Type"))
	require.Equal(t, `"`+art.SHA256+`"`, content.header.Get("ETag"))
	require.Equal(t, "sandbox", content.header.Get("Content-Security-Policy"))

	notModified := h.do(http.MethodGet, "/v1/artifacts/"+art.ID+"/content", nil,
		map[string]string{"If-None-Match": `"` + art.SHA256 + `"`})
	require.Equal(t, http.StatusNotModified, notModified.status)
	require.Empty(t, notModified.body)
	require.Equal(t, `"`+art.SHA256+`"`, notModified.header.Get("ETag"))

	stale := h.do(http.MethodGet, "/v1/artifacts/"+art.ID+"/content", nil, map[string]string{"If-None-Match": `"0000"`})
	require.Equal(t, http.StatusOK, stale.status)

	blob := h.get("/v1/blobs/" + art.SHA256)
	require.Equal(t, http.StatusOK, blob.status, "body: %s", blob.body)
	require.Equal(t, "# Notes\n\nhello", string(blob.body))
	require.Equal(t, "application/octet-stream", blob.header.Get("Content-Type"))

	// A follow-up turn runs the script on; the session goes idle again.
	tr := h.post("/v1/sessions/"+s.ID+"/turns", `{"input":"and again"}`)
	require.Equal(t, http.StatusCreated, tr.status, "body: %s", tr.body)
	next := decode[lt.Turn](t, tr)
	require.Equal(t, "and again", next.Input)
	h.waitStatus(s.ID, lt.SessionIdle)
	turns = decode[lt.List[lt.Turn]](t, h.get("/v1/sessions/"+s.ID+"/turns"))
	require.Len(t, turns.Data, 2)

	// Cancelling an idle session has nothing to stop; an empty body is fine.
	cr := h.do(http.MethodPost, "/v1/sessions/"+s.ID+"/cancel", nil, nil)
	require.Equal(t, http.StatusOK, cr.status, "body: %s", cr.body)
	require.Equal(t, s.ID, decode[lt.Session](t, cr).ID)
}

func TestListSessionsAndEventsPaginate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ids := map[string]bool{}
	for _, in := range []string{"one", "two", "three"} {
		ids[h.createSession(in).ID] = true
	}

	seen := map[string]bool{}
	page := decode[lt.List[lt.Session]](t, h.get("/v1/sessions?limit=2"))
	require.Len(t, page.Data, 2)
	require.NotNil(t, page.NextCursor)
	for _, s := range page.Data {
		seen[s.ID] = true
	}
	for page.NextCursor != nil {
		page = decode[lt.List[lt.Session]](t, h.get("/v1/sessions?limit=2&cursor="+*page.NextCursor))
		for _, s := range page.Data {
			require.False(t, seen[s.ID], "session %s listed twice", s.ID)
			seen[s.ID] = true
		}
	}
	require.Equal(t, ids, seen)

	all := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, all.Data, 3)
	none := decode[lt.List[lt.Session]](t, h.get("/v1/sessions?status=failed"))
	require.Empty(t, none.Data)
	require.NotNil(t, none.Data)

	// Events: pages of 2 and of 500 give the same journal, seq 1..N.
	var id string
	for k := range ids {
		id = k
	}
	h.waitStatus(id, lt.SessionIdle)
	small := h.allEvents(id, 2)
	big := h.allEvents(id, 500)
	require.Equal(t, big, small)
	for i, raw := range big {
		var ev lt.Event
		require.NoError(t, json.Unmarshal(raw, &ev))
		require.EqualValues(t, i+1, ev.Seq)
		require.Equal(t, id, ev.SessionID)
	}

	// ?after= skips, and a page that is not full has no cursor.
	rest := decode[lt.List[lt.Event]](t, h.get("/v1/sessions/"+id+"/events?after=2"))
	require.Len(t, rest.Data, len(big)-2)
	require.EqualValues(t, 3, rest.Data[0].Seq)
	require.Nil(t, rest.NextCursor)
	full := decode[lt.List[lt.Event]](t, h.get("/v1/sessions/"+id+"/events?limit=1"))
	require.NotNil(t, full.NextCursor)
	require.Equal(t, "1", *full.NextCursor)
	past := decode[lt.List[lt.Event]](t, h.get("/v1/sessions/"+id+"/events?after=100000"))
	require.Empty(t, past.Data)
	require.NotNil(t, past.Data)
}

func TestAgents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	spec := `{"name":"notes","spec":{"model":{"provider":"scripted","script":[{"text":"done"}]},"instructions":"v%d"}}`

	r := h.post("/v1/agents", strings.Replace(spec, "%d", "1", 1))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	v1 := decode[lt.Agent](t, r)
	require.Equal(t, "notes", v1.Name)
	require.Equal(t, 1, v1.Version)
	r = h.post("/v1/agents", strings.Replace(spec, "%d", "2", 1))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, 2, decode[lt.Agent](t, r).Version)

	latest := decode[lt.Agent](t, h.get("/v1/agents/notes"))
	require.Equal(t, 2, latest.Version)
	require.Equal(t, "v2", latest.Spec.Instructions)
	first := decode[lt.Agent](t, h.get("/v1/agents/notes?version=1"))
	require.Equal(t, "v1", first.Spec.Instructions)
	list := decode[lt.List[lt.Agent]](t, h.get("/v1/agents"))
	require.Len(t, list.Data, 1)
	versions := decode[lt.List[lt.Agent]](t, h.get("/v1/agents/notes/versions"))
	require.Len(t, versions.Data, 2, "every version, the latest first")
	require.Equal(t, []int{2, 1}, []int{versions.Data[0].Version, versions.Data[1].Version})
	require.Equal(t, []string{"v2", "v1"}, []string{versions.Data[0].Spec.Instructions, versions.Data[1].Spec.Instructions})
	requireError(t, h.get("/v1/agents/nobody/versions"), http.StatusNotFound, "not_found", "")

	requireError(t, h.get("/v1/agents/notes?version=0"), http.StatusBadRequest, "invalid_request", "version")
	requireError(t, h.get("/v1/agents/notes?version=x"), http.StatusBadRequest, "invalid_request", "version")
	requireError(t, h.get("/v1/agents/nobody"), http.StatusNotFound, "not_found", "")
	requireError(t, h.post("/v1/agents", `{"name":"x","spec":{"model":{"provider":"scripted"},"tools":[{"name":"shell","efect":"read"}]}}`),
		http.StatusBadRequest, "invalid_request", "spec.tools[0].efect")

	// A session of the configured agent pins its version.
	sr := h.post("/v1/sessions", `{"agent":"notes","input":"hi"}`)
	require.Equal(t, http.StatusCreated, sr.status, "body: %s", sr.body)
	require.Equal(t, lt.AgentRef{Name: "notes", Version: 2}, decode[lt.Session](t, sr).Agent)
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	small := newHarness(t, harnessOpts{cfg: &server.Config{MaxBodyBytes: 1024}})

	cases := []struct {
		name   string
		h      *harness
		body   string
		status int
		code   string
		field  string
		msg    string
	}{
		{"unknown field", h, `{"agent":"a","input":"x","colour":"red"}`, 400, "invalid_request", "colour", `unknown field "colour"`},
		{"unknown nested field", h, `{"agent_spec":{"model":{"provider":"scripted","modle":"x"}},"input":"x"}`, 400, "invalid_request", "agent_spec.model.modle", ""},
		{"wrong type", h, `{"agent":"a","input":["x"]}`, 400, "invalid_request", "input", "must be a string, got array"},
		{"wrong nested type", h, `{"agent":"a","input":"x","budget":{"max_cost_usd":"5"}}`, 400, "invalid_request", "budget.max_cost_usd", "must be a number"},
		{"malformed", h, `{"agent":"a",,}`, 400, "invalid_request", "", "byte offset 13"},
		{"empty body", h, ``, 400, "invalid_request", "", "empty"},
		{"trailing data", h, `{"agent":"a","input":"x"}x`, 400, "invalid_request", "", "after the JSON object"},
		{"too large", small, `{"input":"` + strings.Repeat("x", 2048) + `"}`, 413, "payload_too_large", "", "1024 bytes"},
		{"engine validation", h, `{"input":"x"}`, 400, "invalid_request", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.h.post("/v1/sessions", tc.body)
			if tc.name == "engine validation" {
				// The engine decides the field; the server passes its error on.
				require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
				e := decode[lt.ErrorResponse](t, r)
				require.Equal(t, "invalid_request", e.Error.Code)
				require.NotEmpty(t, e.Error.Message)
				return
			}
			e := requireError(t, r, tc.status, tc.code, tc.field)
			require.Contains(t, e.Message, tc.msg)
		})
	}

	// A body over the limit on an idempotent decision endpoint is a 413 too.
	r := small.do(http.MethodPost, "/v1/sessions/ses_x/actions/act_y", []byte(`{"reason":"`+strings.Repeat("y", 4096)+`"}`),
		map[string]string{"Idempotency-Key": "k1"})
	requireError(t, r, http.StatusRequestEntityTooLarge, "payload_too_large", "")

	// Query parameters name themselves.
	requireError(t, h.get("/v1/sessions?limit=0"), 400, "invalid_request", "limit")
	requireError(t, h.get("/v1/sessions?limit=501"), 400, "invalid_request", "limit")
	requireError(t, h.get("/v1/sessions?status=asleep"), 400, "invalid_request", "status")
	requireError(t, h.get("/v1/sessions/ses_x/events?after=-1"), 400, "invalid_request", "after")
	requireError(t, h.get("/v1/sessions/ses_x/events?after=1&cursor=2"), 400, "invalid_request", "cursor")
	requireError(t, h.get("/v1/sessions/ses_x/actions?status=open"), 400, "invalid_request", "status")
	requireError(t, h.get("/v1/blobs/not-a-digest"), 400, "invalid_request", "sha256")
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for _, p := range []string{
		"/v1/sessions/ses_nope",
		"/v1/sessions/ses_nope/turns",
		"/v1/sessions/ses_nope/turns/turn_nope",
		"/v1/sessions/ses_nope/events",
		"/v1/sessions/ses_nope/events/stream",
		"/v1/sessions/ses_nope/actions",
		"/v1/sessions/ses_nope/effects",
		"/v1/artifacts/art_nope",
		"/v1/artifacts/art_nope/content",
		"/v1/blobs/" + strings.Repeat("0", 64),
		"/v1/nothing-here",
		"/v1/sessions/",
		"/nope",
	} {
		requireError(t, h.get(p), http.StatusNotFound, "not_found", "")
	}
	requireError(t, h.post("/v1/sessions/ses_nope/turns", `{"input":"x"}`), http.StatusNotFound, "not_found", "")
	requireError(t, h.post("/v1/sessions/ses_nope/cancel", `{}`), http.StatusNotFound, "not_found", "")
	requireError(t, h.post("/v1/sessions/ses_nope/actions/act_nope", `{"decision":"approve"}`), http.StatusNotFound, "not_found", "")

	r := h.do(http.MethodDelete, "/v1/sessions", nil, nil)
	requireError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "")
	require.Equal(t, "GET, HEAD, POST", r.header.Get("Allow"))
	r = h.do(http.MethodPut, "/v1/sessions/ses_x/cancel", []byte(`{}`), nil)
	requireError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "")
	require.Equal(t, "POST", r.header.Get("Allow"))
	r = h.do(http.MethodHead, "/v1/sessions/ses_x/cancel", nil, nil)
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	require.Equal(t, "POST", r.header.Get("Allow"))
}
