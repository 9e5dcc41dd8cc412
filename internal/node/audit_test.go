package node_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/node"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestNodeAuditLog: a node records its API's audit log, prunes the entries
// older than its retention when it starts, and applies its rate limits.
func TestNodeAuditLog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	n, err := node.Open(ctx, &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Logger: quiet, Sandbox: node.SandboxLocal,
		AuditRetention: 24 * time.Hour, RateLimit: "write=2/h"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Close(ctx)) })
	lib := app.WithCaller(ctx, app.LibraryCaller)
	old := &lt.AuditEntry{Time: time.Now().Add(-48 * time.Hour).UTC(), Method: "POST", Route: "POST /v1/sessions", Status: 201, RequestID: "old"}
	_, err = n.App.RecordAudit(lib, old)
	require.NoError(t, err)

	srv := httptest.NewServer(n.API)
	t.Cleanup(srv.Close)
	t.Cleanup(n.API.Shutdown)
	for _, want := range []int{http.StatusBadRequest, http.StatusBadRequest, http.StatusTooManyRequests} {
		res, err := http.Post(srv.URL+"/v1/agents", "application/json", nil)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, want, res.StatusCode)
	}

	require.NoError(t, n.Start(ctx))
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := n.App.ListAudit(lib, lt.ListAuditParams{})
		require.NoError(t, err)
		if len(l.Data) == 3 {
			for _, e := range l.Data {
				require.NotEqual(t, "old", e.RequestID, "pruned")
				require.Equal(t, "POST /v1/agents", e.Route)
			}
			require.Equal(t, http.StatusTooManyRequests, l.Data[2].Status)
			break
		}
		require.True(t, time.Now().Before(deadline), "the old entry is still there: %+v", l.Data)
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	require.NoError(t, n.Close(ctx))
}

// TestNodeRefusesBadRateLimit: a bad spec is refused before anything opens.
func TestNodeRefusesBadRateLimit(t *testing.T) {
	t.Parallel()
	_, err := node.Open(t.Context(), &node.Config{DataDir: t.TempDir(), Logger: quiet, RateLimit: "everything=1/s"})
	require.ErrorContains(t, err, "node config: RateLimit")
}
