package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAdversarialSSO_ForgedUserHeader: the user header of single sign-on
// is a credential only from the trusted proxy. Against the real binary, a
// client on this machine forges X-Forwarded-User naming the admin user:
// a server that trusts another network ignores the header (the request is
// what it is without it: 401 without a key, the key's own role with one);
// a server that trusts this machine as its proxy takes it, and answers a
// user it does not know 403.
func TestAdversarialSSO_ForgedUserHeader(t *testing.T) {
	t.Parallel()
	const boot = "lh-sso-adversary-bootstrap"
	cfg := filepath.Join(t.TempDir(), "users.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("users:\n  - {name: admin@example.com, role: admin}\n  - {name: reader@example.com, role: reader}\n"), 0o600))
	sso := func(trusted string) []string {
		return []string{"--api-key", boot, "--config", cfg, "--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", trusted}
	}
	mint := []byte(`{"name":"minted","role":"admin"}`)
	asJSON := func(h map[string]string) map[string]string {
		out := map[string]string{"Content-Type": "application/json"}
		for k, v := range h {
			out[k] = v
		}
		return out
	}

	elsewhere := startServer(t, sso("10.0.0.0/8")...)
	forged := map[string]string{"X-Forwarded-User": "admin@example.com"}
	r := httpSend(t, elsewhere, http.MethodPost, "/v1/keys", "", mint, asJSON(forged))
	require.Equal(t, http.StatusUnauthorized, r.status, "a forged header mints a key: %s", r.body)
	plain := httpSend(t, elsewhere, http.MethodGet, "/v1/sessions", "", nil, nil)
	r = httpSend(t, elsewhere, http.MethodGet, "/v1/sessions", "", nil, forged)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, plain.status, r.status, "answered as without the header")
	require.Equal(t, plain.err, r.err, "answered as without the header")
	// With a reader's key the header does not lift the key's role.
	created := httpSend(t, elsewhere, http.MethodPost, "/v1/keys", "", []byte(`{"name":"r","role":"reader"}`),
		asJSON(map[string]string{"Authorization": "Bearer " + boot}))
	require.Equal(t, http.StatusCreated, created.status, "%s", created.body)
	var reader lt.APIKey
	require.NoError(t, json.Unmarshal(created.body, &reader))
	withKey := map[string]string{"X-Forwarded-User": "admin@example.com", "Authorization": "Bearer " + reader.Key}
	r = httpSend(t, elsewhere, http.MethodPost, "/v1/keys", "", mint, asJSON(withKey))
	require.Equal(t, http.StatusForbidden, r.status, "a reader's key with a forged header mints a key: %s", r.body)
	require.Contains(t, r.err.Message, "reader")

	// This machine as the proxy: the header is the user.
	proxied := startServer(t, sso("127.0.0.1/32")...)
	r = httpSend(t, proxied, http.MethodGet, "/v1/sessions", "", nil, map[string]string{"X-Forwarded-User": "reader@example.com"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = httpSend(t, proxied, http.MethodPost, "/v1/keys", "", mint, asJSON(map[string]string{"X-Forwarded-User": "reader@example.com"}))
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	r = httpSend(t, proxied, http.MethodGet, "/v1/sessions", "", nil, map[string]string{"X-Forwarded-User": "mallory@example.com"})
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.NotContains(t, string(r.body), "admin@example.com", "the refusal lists no user")
}
