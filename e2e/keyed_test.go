package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// keyed is the real binary started with a bootstrap admin key, called with
// the keys it makes.
type keyed struct {
	t     *testing.T
	srv   *server
	admin string
}

func startKeyed(t *testing.T, admin string) *keyed {
	t.Helper()
	return &keyed{t: t, srv: startServer(t, "--api-key", admin), admin: admin}
}

// send makes a request with key (a JSON body when body is not empty).
func (k *keyed) send(key, method, path, body string) httpResult {
	k.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + key}
	var b []byte
	if body != "" {
		b, h["Content-Type"] = []byte(body), "application/json"
	}
	return httpSend(k.t, k.srv, method, path, "", b, h)
}

// create makes a stored key as the bootstrap admin.
func (k *keyed) create(name string, role lt.Role) lt.APIKey {
	k.t.Helper()
	r := k.send(k.admin, http.MethodPost, "/v1/keys", `{"name":"`+name+`","role":"`+string(role)+`"}`)
	require.Equal(k.t, http.StatusCreated, r.status, "%s", r.body)
	var key lt.APIKey
	require.NoError(k.t, json.Unmarshal(r.body, &key))
	require.NotEmpty(k.t, key.Key)
	return key
}
