package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestKeyRevocationAcrossNodes: two nodes on one PostgreSQL store. A key
// created through node A works on node B at once; revoked through node A,
// it is refused by node B from the very next request, with no wait: no
// node caches a key.
func TestKeyRevocationAcrossNodes(t *testing.T) {
	t.Parallel()
	const boot = "lh-revocation-bootstrap"
	c := newCluster(t, pgtest.FreshSchema(t), 4*time.Second)
	c.args = append(c.args, "--api-key", boot)
	a, b := c.nodes[c.add()], c.nodes[c.add()]
	send := func(srv *server, key, method, path string, body []byte) httpResult {
		t.Helper()
		h := map[string]string{"Authorization": "Bearer " + key}
		if body != nil {
			h["Content-Type"] = "application/json"
		}
		return httpSend(t, srv, method, path, "", body, h)
	}

	r := send(a, boot, http.MethodPost, "/v1/keys", []byte(`{"name":"alice","role":"reader"}`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var k lt.APIKey
	require.NoError(t, json.Unmarshal(r.body, &k))
	for range 3 {
		r = send(b, k.Key, http.MethodGet, "/v1/sessions", nil)
		require.Equal(t, http.StatusOK, r.status, "the key created on node A, on node B: %s", r.body)
	}

	r = send(a, boot, http.MethodDelete, "/v1/keys/"+k.ID, nil)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	r = send(b, k.Key, http.MethodGet, "/v1/sessions", nil)
	require.Equal(t, http.StatusUnauthorized, r.status, "the key revoked on node A, on node B at once: %s", r.body)
	r = send(a, k.Key, http.MethodGet, "/v1/sessions", nil)
	require.Equal(t, http.StatusUnauthorized, r.status, "and on node A: %s", r.body)

	// Node B lists it revoked too.
	r = send(b, boot, http.MethodGet, "/v1/keys", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var keys lt.List[lt.APIKey]
	require.NoError(t, json.Unmarshal(r.body, &keys))
	require.Len(t, keys.Data, 1)
	require.NotNil(t, keys.Data[0].RevokedAt)
}
