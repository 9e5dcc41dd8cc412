package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// requireInvalid asserts err is a 400 naming field, with a message
// containing each of parts.
func requireInvalid(t *testing.T, err error, field string, parts ...string) {
	t.Helper()
	require.Error(t, err)
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status, "status of %v", err)
	require.Equal(t, "invalid_request", ae.Code)
	require.Equal(t, field, ae.Field, "field of %v", err)
	for _, p := range parts {
		require.Contains(t, ae.Message, p)
	}
}

func TestDecodeCreateSessionErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		body  string
		field string
		parts []string
	}{
		{"unknown top-level field", `{"agnet":"x","input":"hi"}`, "agnet", []string{`unknown field "agnet"`}},
		{"unknown nested field", `{"agent_spec":{"model":{"provider":"scripted","modle":"x"}},"input":"hi"}`,
			"agent_spec.model.modle", []string{`unknown field "agent_spec.model.modle"`}},
		{"unknown field in an array element", `{"agent_spec":{"model":{"provider":"scripted"},"tools":[{"name":"shell"},{"name":"x","efect":"read"}]}}`,
			"agent_spec.tools[1].efect", nil},
		{"unknown field in budget", `{"budget":{"max_cost":5}}`, "budget.max_cost", nil},
		{"wrong type", `{"input":5}`, "input", []string{`field "input" must be a string, got number`}},
		{"wrong nested type", `{"budget":{"max_tokens":"many"}}`, "budget.max_tokens", []string{"must be an integer, got string"}},
		{"fraction for an integer", `{"agent_spec":{"model":{"provider":"p"},"tools":[{"name":"a"},{"name":"b","timeout_seconds":1.5}]}}`,
			"agent_spec.tools[1].timeout_seconds", []string{"an integer", "1.5"}},
		{"wrong array element type", `{"constraints":["a",3]}`, "constraints[1]", []string{"must be a string"}},
		{"object for a string", `{"agent":{"name":"x"}}`, "agent", []string{"must be a string, got object"}},
		{"array for an object", `{"budget":[1,2]}`, "budget", []string{"must be an object, got array"}},
		{"malformed", `{"input": }`, "", []string{"malformed JSON at byte offset 10"}},
		{"truncated", `{"input":"x"`, "", []string{"ends at byte offset 12"}},
		{"empty", ``, "", []string{"empty"}},
		{"whitespace only", " \n\t ", "", []string{"empty"}},
		{"null", `null`, "", []string{"must be a JSON object, got null"}},
		{"array", `[{"input":"x"}]`, "", []string{"must be a JSON object, got array"}},
		{"string", `"hello"`, "", []string{"must be a JSON object, got string"}},
		{"trailing object", `{"input":"x"} {"input":"y"}`, "", []string{"after the JSON object at byte offset 14"}},
		{"trailing garbage", "{\"input\":\"x\"}\n}", "", []string{"byte offset 14"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := decodeCreateSession([]byte(tc.body))
			require.Nil(t, req)
			requireInvalid(t, err, tc.field, tc.parts...)
		})
	}
}

func TestDecodeCreateSessionAccepts(t *testing.T) {
	t.Parallel()
	body := `{
	  "agent_spec": {
	    "model": {"provider": "scripted", "name": "demo", "script": [{"text": "done", "anything": {"goes": true}}]},
	    "tools": [{"name": "write_file"}, {"name": "send_email", "type": "function", "effect": "irreversible",
	               "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}],
	    "policies": [{"tool": "send_email", "decision": "ask"}],
	    "environment": {"network": {"allow": ["api.example.com"]}}
	  },
	  "goal": "A brief",
	  "constraints": ["be short"],
	  "budget": {"max_cost_usd": 5, "soft_cost_usd": 2},
	  "metadata": {"ticket": "OPS-12", "nested": {"free": "form"}},
	  "INPUT": "case-insensitive keys are encoding/json's rule"
	}` + "\n"
	req, err := decodeCreateSession([]byte(body))
	require.NoError(t, err)
	require.Equal(t, "case-insensitive keys are encoding/json's rule", req.Input)
	require.Equal(t, "scripted", req.AgentSpec.Model.Provider)
	require.Len(t, req.AgentSpec.Tools, 2)
	require.InDelta(t, 5.0, req.Budget.MaxCostUSD, 0)
	require.JSONEq(t, `{"ticket":"OPS-12","nested":{"free":"form"}}`, string(req.Metadata))
}

func TestDecodeDecisionAndAgent(t *testing.T) {
	t.Parallel()
	d, err := decodeDecision([]byte(`{"decision":"approve","arguments":{"to":"a@b.c"}}`))
	require.NoError(t, err)
	require.Equal(t, "approve", d.Decision)
	require.JSONEq(t, `{"to":"a@b.c"}`, string(d.Arguments))

	_, err = decodeDecision([]byte(`{"decision":"approve","budget":{"max_cost_usd":"lots"}}`))
	requireInvalid(t, err, "budget.max_cost_usd", "must be a number, got string")

	_, err = decodeDecision([]byte(`{"decison":"approve"}`))
	requireInvalid(t, err, "decison", `unknown field "decison"`)

	a, err := decodeAgent([]byte(`{"name":"researcher","spec":{"model":{"provider":"scripted"},"max_steps":10}}`))
	require.NoError(t, err)
	require.Equal(t, "researcher", a.Name)
	require.Equal(t, 10, a.Spec.MaxSteps)

	_, err = decodeAgent([]byte(`{"name":"r","spec":{"model":{"provider":"scripted","temperature":"hot"}}}`))
	requireInvalid(t, err, "spec.model.temperature", "must be a number")
}

func TestDecodeCancelAllowsEmptyBody(t *testing.T) {
	t.Parallel()
	req, err := decodeCancel(nil)
	require.NoError(t, err)
	require.Empty(t, req.Reason)

	req, err = decodeCancel([]byte(`{"reason":"enough"}`))
	require.NoError(t, err)
	require.Equal(t, "enough", req.Reason)

	_, err = decodeCancel([]byte(`{"why":"enough"}`))
	requireInvalid(t, err, "why")
}

func TestQueryParams(t *testing.T) {
	t.Parallel()
	get := func(target string) *http.Request { return httptest.NewRequest(http.MethodGet, target, nil) }

	n, err := queryLimit(get("/x"))
	require.NoError(t, err)
	require.Equal(t, 50, n)
	n, err = queryLimit(get("/x?limit=500"))
	require.NoError(t, err)
	require.Equal(t, 500, n)
	for _, bad := range []string{"0", "501", "-1", "ten", "1.5"} {
		_, err = queryLimit(get("/x?limit=" + bad))
		requireInvalid(t, err, "limit", `"limit"`)
	}
	_, err = queryLimit(get("/x?limit=1&limit=2"))
	requireInvalid(t, err, "limit", "given 2 times")

	_, err = queryEnum(get("/x?status=sleeping"), "status", sessionStatuses...)
	requireInvalid(t, err, "status", "must be one of", `"sleeping"`)
	v, err := queryEnum(get("/x?status=idle"), "status", sessionStatuses...)
	require.NoError(t, err)
	require.Equal(t, "idle", v)

	long := strings.Repeat("x", 500)
	_, err = queryEnum(get("/x?status="+long), "status", "a")
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Less(t, len(ae.Message), 200, "an echoed value is shortened")
}

func TestStreamStart(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodGet, "/x?after=3", nil)
	n, err := streamStart(r)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)

	r.Header.Set("Last-Event-ID", "7")
	n, err = streamStart(r)
	require.NoError(t, err)
	require.EqualValues(t, 7, n, "Last-Event-ID wins over ?after=")

	r.Header.Set("Last-Event-ID", "seven")
	_, err = streamStart(r)
	requireInvalid(t, err, "Last-Event-ID")

	_, err = streamStart(httptest.NewRequest(http.MethodGet, "/x?after=-1", nil))
	requireInvalid(t, err, "after", "at least 0")
}

func TestWildcardNamesAndEtag(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"id", "action_id"}, wildcardNames("POST /v1/sessions/{id}/actions/{action_id}"))
	require.Equal(t, []string{"rest"}, wildcardNames("GET /files/{rest...}"))
	require.Empty(t, wildcardNames("POST /v1/sessions"))

	d := strings.Repeat("ab", 32)
	require.True(t, etagMatch(`"`+d+`"`, d))
	require.True(t, etagMatch(`"other", W/"`+d+`"`, d))
	require.True(t, etagMatch(`*`, d))
	require.False(t, etagMatch(`"other"`, d))
	require.False(t, etagMatch(d, d), "an unquoted tag is not an entity tag")
	require.False(t, etagMatch("", d))
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:5555":        true,
		"127.8.9.10:1":          true,
		"[::1]:80":              true,
		"[::ffff:127.0.0.1]:80": true,
		"10.0.0.2:80":           false,
		"[2001:db8::1]:443":     false,
		"192.0.2.1:1234":        false,
		"":                      false,
		"garbage":               false,
	} {
		require.Equal(t, want, isLoopback(addr), addr)
	}
}
