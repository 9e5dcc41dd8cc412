package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// keySender returns a function that sends a request to srv with key as
// its bearer token, and body, when not empty, as JSON.
func keySender(t *testing.T, srv *server) func(key, method, path, body string) httpResult {
	return func(key, method, path, body string) httpResult {
		t.Helper()
		h := map[string]string{"Authorization": "Bearer " + key}
		var b []byte
		if body != "" {
			b, h["Content-Type"] = []byte(body), "application/json"
		}
		return httpSend(t, srv, method, path, "", b, h)
	}
}

// TestAdversarialKeys_NoKeyWidensItself: a key handed to a model's
// operator or to a reader, used against the real binary, cannot mint a
// key (of any role), read or write the vault, or outlive its revocation.
func TestAdversarialKeys_NoKeyWidensItself(t *testing.T) {
	t.Parallel()
	const admin = "lh-keys-adversary-bootstrap"
	srv := startServer(t, "--api-key", admin)
	send := keySender(t, srv)
	create := func(role lt.Role) lt.APIKey {
		t.Helper()
		r := send(admin, http.MethodPost, "/v1/keys", `{"name":"`+string(role)+`","role":"`+string(role)+`"}`)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		var k lt.APIKey
		require.NoError(t, json.Unmarshal(r.body, &k))
		require.NotEmpty(t, k.Key)
		return k
	}
	reader, operator := create(lt.RoleReader), create(lt.RoleOperator)

	for _, k := range []lt.APIKey{reader, operator} {
		for _, body := range []string{`{"name":"x","role":"admin"}`, `{"name":"x","role":"reader"}`} {
			r := send(k.Key, http.MethodPost, "/v1/keys", body)
			require.Equal(t, http.StatusForbidden, r.status, "%s mints a key: %s", k.Role, r.body)
		}
		require.Equal(t, http.StatusForbidden, send(k.Key, http.MethodGet, "/v1/keys", "").status, "%s lists keys", k.Role)
		require.Equal(t, http.StatusForbidden, send(k.Key, http.MethodGet, "/v1/secrets", "").status, "%s lists the vault", k.Role)
		r := send(k.Key, http.MethodPut, "/v1/secrets/STOLEN", `{"value":"x","hosts":["evil.example"]}`)
		require.Equal(t, http.StatusForbidden, r.status, "%s writes the vault: %s", k.Role, r.body)
	}
	r := send(reader.Key, http.MethodPost, "/v1/sessions", `{"agent_spec":{"model":{"provider":"scripted","script":[{"text":"hi"}]}},"input":"hi"}`)
	require.Equal(t, http.StatusForbidden, r.status, "a reader starts work: %s", r.body)
	require.Equal(t, http.StatusOK, send(reader.Key, http.MethodGet, "/v1/sessions", "").status, "a reader reads")

	// Revoked: refused from the next request on, with the bytes of an
	// unknown key (nothing says the key once existed).
	require.Equal(t, http.StatusNoContent, send(admin, http.MethodDelete, "/v1/keys/"+reader.ID, "").status)
	revoked := send(reader.Key, http.MethodGet, "/v1/sessions", "")
	unknown := send("lh_"+strings.Repeat("a", len(reader.Key)-3), http.MethodGet, "/v1/sessions", "")
	require.Equal(t, http.StatusUnauthorized, revoked.status, "%s", revoked.body)
	require.Equal(t, string(unknown.body), string(revoked.body))
}
