package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// routeCase is a request to one route, and the Service method the route
// is expected to be guarded by ("" for an open route).
type routeCase struct {
	method string
	path   string
	body   string
}

// routeCases has an entry for every route the server registers: a route
// added without one fails TestRoutesByRole. The ids name nothing: an
// allowed caller is answered by the use case (a 400 or a 404 here), a
// refused one by the role check, before anything is looked up.
var routeCases = map[string]routeCase{
	"GET /healthz": {"", "/healthz", ""},
	"GET /readyz":  {"", "/readyz", ""},
	"GET /metrics": {"", "/metrics", ""},

	"POST /v1/sessions":                          {"CreateSession", "/v1/sessions", `{}`},
	"GET /v1/sessions":                           {"ListSessions", "/v1/sessions", ""},
	"GET /v1/sessions/{id}":                      {"GetSession", "/v1/sessions/ses_x", ""},
	"POST /v1/sessions/{id}/turns":               {"CreateTurn", "/v1/sessions/ses_x/turns", `{}`},
	"GET /v1/sessions/{id}/turns":                {"ListTurns", "/v1/sessions/ses_x/turns", ""},
	"GET /v1/sessions/{id}/turns/{turn_id}":      {"GetTurn", "/v1/sessions/ses_x/turns/turn_x", ""},
	"POST /v1/sessions/{id}/cancel":              {"Cancel", "/v1/sessions/ses_x/cancel", `{}`},
	"POST /v1/sessions/{id}/constraints":         {"AddConstraint", "/v1/sessions/ses_x/constraints", `{}`},
	"POST /v1/sessions/{id}/review":              {"Review", "/v1/sessions/ses_x/review", `{}`},
	"POST /v1/sessions/{id}/fork":                {"Fork", "/v1/sessions/ses_x/fork", `{}`},
	"POST /v1/sessions/{id}/signals":             {"SendSignal", "/v1/sessions/ses_x/signals", `{}`},
	"PATCH /v1/sessions/{id}/budget":             {"UpdateBudget", "/v1/sessions/ses_x/budget", `{}`},
	"GET /v1/sessions/{id}/events":               {"ListEvents", "/v1/sessions/ses_x/events", ""},
	"GET /v1/sessions/{id}/events/stream":        {"StreamEvents", "/v1/sessions/ses_x/events/stream", ""},
	"GET /v1/sessions/{id}/actions":              {"ListActions", "/v1/sessions/ses_x/actions", ""},
	"POST /v1/sessions/{id}/actions/{action_id}": {"DecideAction", "/v1/sessions/ses_x/actions/act_x", `{}`},
	"GET /v1/sessions/{id}/effects":              {"ListEffects", "/v1/sessions/ses_x/effects", ""},
	"GET /v1/sessions/{id}/effects/{effect_id}":  {"GetEffect", "/v1/sessions/ses_x/effects/eff_x", ""},
	"GET /v1/sessions/{id}/checkpoints":          {"ListCheckpoints", "/v1/sessions/ses_x/checkpoints", ""},
	"GET /v1/sessions/{id}/artifacts":            {"ListArtifacts", "/v1/sessions/ses_x/artifacts", ""},
	"GET /v1/sessions/{id}/trace":                {"SessionTrace", "/v1/sessions/ses_x/trace", ""},
	"POST /v1/sessions/{id}/steer":               {"Steer", "/v1/sessions/ses_x/steer", `{}`},
	"POST /v1/sessions/{id}/pause":               {"Pause", "/v1/sessions/ses_x/pause", `{}`},
	"POST /v1/sessions/{id}/resume":              {"Resume", "/v1/sessions/ses_x/resume", `{}`},

	"GET /v1/actions":             {"ListAllActions", "/v1/actions", ""},
	"GET /v1/actions/{action_id}": {"GetAction", "/v1/actions/act_x", ""},

	"GET /v1/artifacts/{id}":         {"GetArtifact", "/v1/artifacts/art_x", ""},
	"GET /v1/artifacts/{id}/content": {"ArtifactContent", "/v1/artifacts/art_x/content", ""},
	"GET /v1/blobs/{sha256}":         {"GetBlob", "/v1/blobs/" + strings.Repeat("0", 64), ""},

	"GET /v1/sessions/{id}/files":                                       {"ListFiles", "/v1/sessions/ses_x/files", ""},
	"GET /v1/sessions/{id}/files/{path...}":                             {"OpenFile", "/v1/sessions/ses_x/files/a.txt", ""},
	"PUT /v1/sessions/{id}/files/{path...}":                             {"PutFileIfMatch", "/v1/sessions/ses_x/files/a.txt", `x`},
	"DELETE /v1/sessions/{id}/files/{path...}":                          {"DeleteFileIfMatch", "/v1/sessions/ses_x/files/a.txt", ""},
	"GET /v1/sessions/{id}/checkpoints/{checkpoint_id}/files":           {"ListFiles", "/v1/sessions/ses_x/checkpoints/chk_x/files", ""},
	"GET /v1/sessions/{id}/checkpoints/{checkpoint_id}/files/{path...}": {"OpenFile", "/v1/sessions/ses_x/checkpoints/chk_x/files/a.txt", ""},

	"POST /v1/agents":                {"PutAgent", "/v1/agents", `{}`},
	"GET /v1/agents":                 {"ListAgents", "/v1/agents", ""},
	"GET /v1/agents/{name}":          {"GetAgent", "/v1/agents/nope", ""},
	"GET /v1/agents/{name}/versions": {"ListAgentVersions", "/v1/agents/nope/versions", ""},

	"PUT /v1/secrets/{name}":    {"PutSecret", "/v1/secrets/A_TOKEN", `{}`},
	"GET /v1/secrets":           {"ListSecrets", "/v1/secrets", ""},
	"DELETE /v1/secrets/{name}": {"DeleteSecret", "/v1/secrets/A_TOKEN", ""},

	"GET /v1/me":      {"Me", "/v1/me", ""},
	"GET /v1/version": {"Version", "/v1/version", ""},

	"POST /v1/keys":        {"CreateKey", "/v1/keys", `{}`},
	"GET /v1/keys":         {"ListKeys", "/v1/keys", ""},
	"DELETE /v1/keys/{id}": {"RevokeKey", "/v1/keys/key_x", ""},

	"GET /v1/audit": {"ListAudit", "/v1/audit", ""},

	"POST /v1/webhooks/endpoints":        {"CreateWebhookEndpoint", "/v1/webhooks/endpoints", `{}`},
	"GET /v1/webhooks/endpoints":         {"ListWebhookEndpoints", "/v1/webhooks/endpoints", ""},
	"DELETE /v1/webhooks/endpoints/{id}": {"DeleteWebhookEndpoint", "/v1/webhooks/endpoints/whe_x", ""},
	"GET /v1/webhooks/deliveries":        {"ListWebhookDeliveries", "/v1/webhooks/deliveries", ""},

	"GET /v1/reports/tasks": {"TaskReport", "/v1/reports/tasks", ""},

	"GET /v1/runners":         {"ListRunners", "/v1/runners", ""},
	"GET /v1/runners/connect": {"", "/v1/runners/connect", ""},

	"GET /v1/openapi.json": {"", "/v1/openapi.json", ""},
}

// ownRules are the routes outside app.Permissions that still need a role:
// the roles each allows.
var ownRules = map[string][]lt.Role{
	// The metrics span every project: an admin's (when keys are on).
	"GET /metrics": {lt.RoleAdmin},
	// A runner's connection: the runner role alone, not even an admin
	// (a key that can do everything does not belong on a runner).
	"GET /v1/runners/connect": {lt.RoleRunner},
}

// ownStatus is what an allowed caller of an ownRules route gets from this
// test's plain request, when it is not a 2xx: a runner's connection needs
// a WebSocket upgrade, which the request does not ask for.
var ownStatus = map[string]int{
	"GET /v1/runners/connect": http.StatusUpgradeRequired,
}

// metricsOK is a /metrics handler that answers.
var metricsOK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("up 1\n")) })

// routeHeaders are the headers a route's request needs beyond the key.
var routeHeaders = map[string]map[string]string{
	"PUT /v1/sessions/{id}/files/{path...}": {"Content-Type": "application/octet-stream"},
}

// TestRoutesByRole: every route × every role (a key of the store for
// each, and the bootstrap key) → the expected status. A role the route's
// method does not allow (app.Permissions) is a 403 naming the role, before
// the request is decoded or anything looked up; an allowed one gets past
// the check (here a 2xx, a 400 or a 404, never a 401, a 403 or a 5xx). The
// server's own route → method mapping must be the one this table states.
func TestRoutesByRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"boot-key"}, Metrics: metricsOK}})

	routes := h.srv.Routes()
	seen := map[string]bool{}
	for _, r := range routes {
		seen[r.Pattern] = true
		tc, ok := routeCases[r.Pattern]
		require.True(t, ok, "route %q has no entry in routeCases: add one", r.Pattern)
		require.Equal(t, tc.method, r.Method, "route %q: the Service method that guards it", r.Pattern)
		if len(r.Roles) > 0 {
			require.Equal(t, ownRules[r.Pattern], r.Roles, "route %q: the roles it allows", r.Pattern)
		}
	}
	for pattern := range routeCases {
		require.True(t, seen[pattern], "routeCases lists %q, which the server does not register", pattern)
	}

	tokens := map[string]string{"bootstrap admin": "boot-key"}
	for _, role := range lt.Roles() {
		k := h.createKey(fmt.Sprintf(`{"name": "%s-key", "role": "%s"}`, role, role))
		tokens[string(role)] = k.Key
	}
	roleOf := func(who string) lt.Role {
		if who == "bootstrap admin" {
			return lt.RoleAdmin
		}
		return lt.Role(who)
	}

	for _, r := range routes {
		tc := routeCases[r.Pattern]
		verb, _, _ := strings.Cut(r.Pattern, " ")
		for who, token := range tokens {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			header := map[string]string{"Authorization": "Bearer " + token}
			for k, v := range routeHeaders[r.Pattern] {
				header[k] = v
			}
			res := h.do(verb, tc.path, body, header)
			name := fmt.Sprintf("%s as %s", r.Pattern, who)
			if roleOf(who) == lt.RoleRunner && strings.HasPrefix(tc.path, "/v1/") && r.Pattern != "GET /v1/runners/connect" {
				// A runner key opens its connection, nothing else.
				e := requireError(t, res, http.StatusForbidden, lt.CodeForbidden, "")
				require.Contains(t, e.Message, "the runner role may use only GET /v1/runners/connect", name)
				continue
			}
			if own, ok := ownRules[r.Pattern]; ok {
				if slices.Contains(own, roleOf(who)) {
					if want, ok := ownStatus[r.Pattern]; ok {
						require.Equal(t, want, res.status, "%s: body: %s", name, res.body)
						continue
					}
					require.Less(t, res.status, 300, "%s: body: %s", name, res.body)
					continue
				}
				e := requireError(t, res, http.StatusForbidden, lt.CodeForbidden, "")
				require.Contains(t, e.Message, "the "+string(roleOf(who))+" role may not", name)
				continue
			}
			if tc.method == "" || app.Allowed(tc.method, roleOf(who)) {
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, res.status, "%s: body: %s", name, res.body)
				require.Less(t, res.status, 500, "%s: body: %s", name, res.body)
				continue
			}
			e := requireError(t, res, http.StatusForbidden, lt.CodeForbidden, "")
			require.Contains(t, e.Message, "the "+string(roleOf(who))+" role may not call "+tc.method, name)
		}
	}
}
