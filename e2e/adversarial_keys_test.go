package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAdversarialKeys_NoKeyWidensItself: a key handed to a model's
// operator or to a reader, used against the real binary, cannot mint a
// key (of any role), read or write the vault, or outlive its revocation.
func TestAdversarialKeys_NoKeyWidensItself(t *testing.T) {
	t.Parallel()
	const admin = "lh-keys-adversary-bootstrap"
	k := startKeyed(t, admin)
	send := k.send
	reader, operator := k.create("reader", lt.RoleReader), k.create("operator", lt.RoleOperator)

	for _, key := range []lt.APIKey{reader, operator} {
		for _, body := range []string{`{"name":"x","role":"admin"}`, `{"name":"x","role":"reader"}`} {
			r := send(key.Key, http.MethodPost, "/v1/keys", body)
			require.Equal(t, http.StatusForbidden, r.status, "%s mints a key: %s", key.Role, r.body)
		}
		require.Equal(t, http.StatusForbidden, send(key.Key, http.MethodGet, "/v1/keys", "").status, "%s lists keys", key.Role)
		require.Equal(t, http.StatusForbidden, send(key.Key, http.MethodGet, "/v1/secrets", "").status, "%s lists the vault", key.Role)
		r := send(key.Key, http.MethodPut, "/v1/secrets/STOLEN", `{"value":"x","hosts":["evil.example"]}`)
		require.Equal(t, http.StatusForbidden, r.status, "%s writes the vault: %s", key.Role, r.body)
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
