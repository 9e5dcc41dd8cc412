package server_test

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestKeysEndpoints: POST /v1/keys answers 201 with the token (not cached,
// and not kept by the idempotency store: a replayed Idempotency-Key makes
// a second key); GET lists metadata without tokens; DELETE answers 204,
// again 204, and 404 for an unknown id.
func TestKeysEndpoints(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})

	body := `{"name": "alice", "role": "approver", "project": "default"}`
	r := h.do(http.MethodPost, "/v1/keys", []byte(body), map[string]string{"Idempotency-Key": "same"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	k := decode[lt.APIKey](t, r)
	require.True(t, strings.HasPrefix(k.ID, "key_"), k.ID)
	require.True(t, strings.HasPrefix(k.Key, "lh_"), "the token is shown once")
	require.Equal(t, "alice", k.Name)
	require.Equal(t, lt.RoleApprover, k.Role)
	require.Equal(t, "default", k.Project)

	r = h.do(http.MethodPost, "/v1/keys", []byte(body), map[string]string{"Idempotency-Key": "same"})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	again := decode[lt.APIKey](t, r)
	require.NotEqual(t, k.ID, again.ID, "no replay: a token is kept nowhere")
	require.NotEqual(t, k.Key, again.Key)

	r = h.get("/v1/keys")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), k.Key, "a list never shows a token")
	l := decode[lt.List[lt.APIKey]](t, r)
	require.Len(t, l.Data, 2)
	require.Equal(t, k.ID, l.Data[0].ID)
	require.Equal(t, k.Prefix, l.Data[0].Prefix)

	r = h.do(http.MethodDelete, "/v1/keys/"+k.ID, nil, nil)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	r = h.do(http.MethodDelete, "/v1/keys/"+k.ID, nil, nil)
	require.Equal(t, http.StatusNoContent, r.status, "revoking again: body: %s", r.body)
	requireError(t, h.do(http.MethodDelete, "/v1/keys/key_nope", nil, nil), http.StatusNotFound, lt.CodeNotFound, "")

	l = decode[lt.List[lt.APIKey]](t, h.get("/v1/keys"))
	require.NotNil(t, l.Data[0].RevokedAt)
	require.Nil(t, l.Data[1].RevokedAt)
}

// TestCreateKeyInvalidFields: each bad body is a 400 naming its field.
func TestCreateKeyInvalidFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for body, field := range map[string]string{
		`{"role": "admin"}`:                                                     "name",
		`{"name": "x", "role": "root"}`:                                         "role",
		`{"name": "x", "role": "reader", "project": "Not Valid"}`:               "project",
		`{"name": "x", "role": "reader", "expires_at": "2001-01-01T00:00:00Z"}`: "expires_at",
		`{"name": "x", "role": "reader", "scopes": []}`:                         "scopes",
	} {
		requireError(t, h.post("/v1/keys", body), http.StatusBadRequest, lt.CodeInvalidRequest, field)
	}
	l := decode[lt.List[lt.APIKey]](t, h.get("/v1/keys"))
	require.Empty(t, l.Data)
}

// TestMeEndpoint: GET /v1/me answers each key with its own identity (not
// cached: one URL, many answers) and its role's methods, except a
// runner's key, which is refused (it opens its connection and nothing
// else); the bootstrap key is the admin "bootstrap" of every project;
// an unknown key is a 401.
func TestMeEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"boot-key"}}})
	as := func(token string) *response {
		return h.do(http.MethodGet, "/v1/me", nil, map[string]string{"Authorization": "Bearer " + token})
	}

	r := as("boot-key")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	require.JSONEq(t, `{"name": "bootstrap", "role": "admin", "project": "", "permissions": `+jsonList(app.AllowedMethods(lt.RoleAdmin))+`}`, string(r.body))

	for _, role := range lt.Roles() {
		k := h.createKey(`{"name": "alice", "role": "` + string(role) + `"}`)
		if role == lt.RoleRunner {
			e := requireError(t, as(k.Key), http.StatusForbidden, lt.CodeForbidden, "")
			require.Contains(t, e.Message, "a runner key opens its connection and nothing else")
			continue
		}
		me := decode[lt.Identity](t, as(k.Key))
		require.Equal(t, lt.Identity{KeyID: k.ID, Name: "alice", Role: role, Project: "default", Permissions: app.AllowedMethods(role)}, me)
	}
	approver := decode[lt.Identity](t, as(h.createKey(`{"name": "bob", "role": "approver"}`).Key))
	require.Contains(t, approver.Permissions, "DecideAction")
	require.NotContains(t, approver.Permissions, "Steer")

	requireError(t, as("lh_"+strings.Repeat("a", 52)), http.StatusUnauthorized, lt.CodeUnauthorized, "")
}

// TestVersionEndpoint: GET /v1/version names this build for every role
// that uses the API (a runner, which only connects an environment, gets a
// 403); without a key it is a 401 like any /v1 route.
func TestVersionEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"boot-key"}}})
	as := func(token string) *response {
		return h.do(http.MethodGet, "/v1/version", nil, map[string]string{"Authorization": "Bearer " + token})
	}
	for _, role := range lt.Roles() {
		r := as(h.createKey(`{"name": "v-` + string(role) + `", "role": "` + string(role) + `"}`).Key)
		if role == lt.RoleRunner {
			requireError(t, r, http.StatusForbidden, lt.CodeForbidden, "")
			continue
		}
		require.Equal(t, http.StatusOK, r.status, "%s: %s", role, r.body)
		v := decode[lt.BuildInfo](t, r)
		require.Equal(t, runtime.Version(), v.GoVersion)
		require.NotEmpty(t, v.Version)
	}
	requireError(t, h.do(http.MethodGet, "/v1/version", nil, nil), http.StatusUnauthorized, lt.CodeUnauthorized, "")
}

func jsonList(items []string) string {
	b, _ := json.Marshal(items)
	return string(b)
}
