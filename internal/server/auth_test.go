package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"key-one", "key-two"}}})

	r := h.get("/v1/sessions")
	requireError(t, r, http.StatusUnauthorized, "unauthorized", "")
	require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")

	for _, bad := range []string{"Bearer key-three", "Bearer key-on", "Bearer key-one-more", "Basic a2V5LW9uZQ==", "key-one", "Bearer "} {
		r := h.do(http.MethodGet, "/v1/sessions", nil, map[string]string{"Authorization": bad})
		requireError(t, r, http.StatusUnauthorized, "unauthorized", "")
	}
	// Unknown routes under /v1 answer 401 too, so they reveal nothing.
	requireError(t, h.get("/v1/secret-route"), http.StatusUnauthorized, "unauthorized", "")

	for _, good := range []string{"Bearer key-one", "bearer key-two", "Bearer   key-one  "} {
		r := h.do(http.MethodGet, "/v1/sessions", nil, map[string]string{"Authorization": good})
		require.Equal(t, http.StatusOK, r.status, "%q: %s", good, r.body)
	}

	// Probes are open.
	require.Equal(t, http.StatusOK, h.get("/healthz").status)
	require.Equal(t, http.StatusOK, h.get("/readyz").status)

	// With keys, the peer's address does not matter.
	req := httptest.NewRequest(http.MethodGet, "/v1/sessions", nil)
	req.RemoteAddr = "203.0.113.9:4711"
	req.Header.Set("Authorization", "Bearer key-two")
	rec := httptest.NewRecorder()
	h.srv.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

func TestNoKeysMeansLoopbackOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})

	serve := func(path, remote string) *response {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = remote
		req.Host = "localhost" // httptest's example.com would be refused: see TestHostRule
		rec := httptest.NewRecorder()
		h.srv.ServeHTTP(rec, req)
		return &response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}
	for _, remote := range []string{"203.0.113.9:4711", "[2001:db8::5]:80", "10.1.2.3:1"} {
		e := requireError(t, serve("/v1/sessions", remote), http.StatusForbidden, "forbidden", "")
		require.Contains(t, e.Message, "local machine")
		require.Equal(t, http.StatusOK, serve("/healthz", remote).status)
		require.Equal(t, http.StatusOK, serve("/readyz", remote).status)
	}
	for _, remote := range []string{"127.0.0.1:5000", "127.0.0.53:1", "[::1]:9"} {
		r := serve("/v1/sessions", remote)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", remote, r.body)
		decode[lt.List[lt.Session]](t, r)
	}
	// The httptest server listens on loopback: real requests pass.
	require.Equal(t, http.StatusOK, h.get("/v1/agents").status)
}
