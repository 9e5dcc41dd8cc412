package client

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestCreateKeyIsNotRetried: a 503 is returned, not retried (the server
// does not replay POST /v1/keys, so a retry could make a second key).
func TestCreateKeyIsNotRetried(t *testing.T) {
	t.Parallel()
	key := lt.APIKey{ID: "key_1", Name: "alice", Role: lt.RoleApprover, Project: "support", Prefix: "lh_abcdefgh",
		CreatedAt: testTime, Key: "lh_abcdefgh"}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeAPIError(w, http.StatusServiceUnavailable, lt.CodeUnavailable, "draining")
			return
		}
		writeJSON(w, http.StatusCreated, key)
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)
	req := &lt.CreateKeyRequest{Name: "alice", Role: lt.RoleApprover, Project: "support"}

	_, err := c.CreateKey(t.Context(), req)
	require.True(t, hasStatus(err, http.StatusServiceUnavailable), "%v", err)
	require.Len(t, rc.all(), 1, "not retried")
	got, err := c.CreateKey(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, &key, got)
	for _, r := range rc.all() {
		require.Equal(t, http.MethodPost, r.method)
		require.Equal(t, "/v1/keys", r.path)
		require.JSONEq(t, `{"name":"alice","role":"approver","project":"support"}`, r.body)
	}
	_, err = c.CreateKey(t.Context(), nil)
	require.ErrorContains(t, err, "req is nil")
}

func TestListAndRevokeKeys(t *testing.T) {
	t.Parallel()
	list := lt.List[lt.APIKey]{Data: []lt.APIKey{{ID: "key_1", Name: "ci", Role: lt.RoleOperator, Project: "default",
		Prefix: "lh_abcdefgh", CreatedAt: testTime}}}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet:
			writeJSON(w, http.StatusOK, list)
		case r.URL.Path == "/v1/keys/key_1":
			w.WriteHeader(http.StatusNoContent)
		default:
			writeAPIError(w, http.StatusNotFound, lt.CodeNotFound, "API key key_2 not found")
		}
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	got, err := c.ListKeys(t.Context())
	require.NoError(t, err)
	require.Equal(t, &list, got)
	require.NoError(t, c.RevokeKey(t.Context(), "key_1"))
	err = c.RevokeKey(t.Context(), "key_2")
	require.True(t, IsNotFound(err), "%v", err)
	require.ErrorContains(t, c.RevokeKey(t.Context(), ""), "id is empty")

	reqs := rc.all()
	require.Len(t, reqs, 3, "an invalid id sends nothing")
	require.Equal(t, "/v1/keys", reqs[0].path)
	require.Equal(t, http.MethodDelete, reqs[1].method)
}

// TestMe: GET /v1/me, decoded; an error says what was asked.
func TestMe(t *testing.T) {
	t.Parallel()
	me := lt.Identity{KeyID: "key_1", Name: "alice", Role: lt.RoleApprover, Project: "default", Permissions: []string{"DecideAction", "Me"}}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeJSON(w, http.StatusOK, me)
			return
		}
		writeAPIError(w, http.StatusUnauthorized, lt.CodeUnauthorized, "missing or invalid API key")
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	got, err := c.Me(t.Context())
	require.NoError(t, err)
	require.Equal(t, &me, got)
	_, err = c.Me(t.Context())
	require.True(t, hasStatus(err, http.StatusUnauthorized), "%v", err)
	require.ErrorContains(t, err, "me: ")
	reqs := rc.all()
	require.Equal(t, http.MethodGet, reqs[0].method)
	require.Equal(t, "/v1/me", reqs[0].path)
}

// TestVersion: GET /v1/version, decoded; an error says what was asked.
func TestVersion(t *testing.T) {
	t.Parallel()
	v := lt.BuildInfo{Version: "v1.4.0", Revision: "6d047d8e", GoVersion: "go1.26.0"}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeJSON(w, http.StatusOK, v)
			return
		}
		writeAPIError(w, http.StatusUnauthorized, lt.CodeUnauthorized, "missing or invalid API key")
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	got, err := c.Version(t.Context())
	require.NoError(t, err)
	require.Equal(t, &v, got)
	_, err = c.Version(t.Context())
	require.True(t, hasStatus(err, http.StatusUnauthorized), "%v", err)
	require.ErrorContains(t, err, "version: ")
	reqs := rc.all()
	require.Equal(t, http.MethodGet, reqs[0].method)
	require.Equal(t, "/v1/version", reqs[0].path)
}

// TestListAgentVersions: GET /v1/agents/{name}/versions with the project;
// an empty name is refused before any request.
func TestListAgentVersions(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, lt.List[lt.Agent]{Data: []lt.Agent{{Name: "notes", Version: 2}, {Name: "notes", Version: 1}}})
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	l, err := c.ListAgentVersions(t.Context(), "support", "notes")
	require.NoError(t, err)
	require.Len(t, l.Data, 2)
	reqs := rc.all()
	require.Equal(t, "/v1/agents/notes/versions", reqs[0].path)
	require.Equal(t, "project=support", reqs[0].query)
	_, err = c.ListAgentVersions(t.Context(), "", "")
	require.Error(t, err)
	require.Len(t, rc.all(), 1, "no request for an empty name")
}
