package longhaul_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRuntimeListAudit: the requests to the runtime's Handler are in its
// audit log, which the library reads; its own in-process calls are not
// requests, and not entries.
func TestRuntimeListAudit(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	srv := httptest.NewServer(rt.Handler())
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, nil)
	require.NoError(t, err)

	_, err = rt.CreateKey(t.Context(), &lt.CreateKeyRequest{Name: "in-process", Role: lt.RoleReader})
	require.NoError(t, err)
	_, err = c.CreateKey(t.Context(), &lt.CreateKeyRequest{Name: "over-http", Role: lt.RoleReader})
	require.NoError(t, err)

	l, err := rt.ListAudit(t.Context(), lt.ListAuditParams{})
	require.NoError(t, err)
	require.Len(t, l.Data, 1, "only the HTTP request")
	e := l.Data[0]
	require.Equal(t, &lt.Actor{Name: "local", Role: lt.RoleAdmin}, e.Actor)
	require.Equal(t, "POST /v1/keys", e.Route)
	require.Equal(t, http.StatusCreated, e.Status)

	_, err = rt.ListAudit(t.Context(), lt.ListAuditParams{Since: "never"})
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "since", ae.Field)
}
