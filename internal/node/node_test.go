package node_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/node"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var quiet = slog.New(slog.DiscardHandler)

// TestNodeRunsASession wires a node on SQLite, serves its API and runs a
// session through it; Close releases the directory for the next node.
func TestNodeRunsASession(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "data") // created by Open
	n, err := node.Open(ctx, &node.Config{DataDir: dir, Logger: quiet, Sandbox: node.SandboxLocal})
	require.NoError(t, err)
	require.Equal(t, "SQLite", n.Store.Kind)
	require.Equal(t, filepath.Join(dir, node.DBFile), n.Store.Target)
	require.Equal(t, node.SandboxLocal, n.Sandbox)
	require.NotEmpty(t, n.SandboxWarning)
	require.FileExists(t, filepath.Join(dir, node.NodeIDFile))
	require.NoError(t, n.Start(ctx))
	require.ErrorContains(t, n.Start(ctx), "already started")

	srv := httptest.NewServer(n.API)
	c, err := client.New(srv.URL, nil)
	require.NoError(t, err)
	s, err := c.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: []byte(`[{"text":"hi"}]`)}},
		Input:     "hi",
	})
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for s.Status != lt.SessionIdle {
		require.True(t, time.Now().Before(deadline), "session status %s", s.Status)
		time.Sleep(5 * time.Millisecond) // polling with a deadline
		s, err = c.GetSession(ctx, s.ID)
		require.NoError(t, err)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the metrics are served, to loopback without keys")
	n.API.Shutdown()
	srv.Close()

	require.NoError(t, n.Close(ctx))
	require.NoError(t, n.Close(ctx), "a second Close returns the first result")
	require.ErrorContains(t, n.Start(ctx), "closed")

	again, err := node.Open(ctx, &node.Config{DataDir: dir, Logger: quiet, Sandbox: node.SandboxLocal})
	require.NoError(t, err)
	require.Equal(t, n.NodeID, again.NodeID)
	require.NoError(t, again.Close(ctx), "Close without Start releases what Open opened")
}

func TestOpenRefusesBadConfig(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for name, tc := range map[string]struct {
		cfg  *node.Config
		want string
	}{
		"nil":          {nil, "node config: nil"},
		"no data dir":  {&node.Config{}, "DataDir is required"},
		"sandbox":      {&node.Config{DataDir: t.TempDir(), Sandbox: "vm"}, `Sandbox "vm"`},
		"lease":        {&node.Config{DataDir: t.TempDir(), LeaseTTL: -time.Second}, "LeaseTTL -1s is negative"},
		"webhook port": {&node.Config{DataDir: t.TempDir(), WebhookAllowPorts: []int{70000}}, "70000 is not a port number"},
		"api key":      {&node.Config{DataDir: t.TempDir(), APIKeys: []string{"a b"}}, "APIKeys[0] contains whitespace"},
		"store url":    {&node.Config{DataDir: t.TempDir(), StoreURL: "mysql://db"}, "must be a postgres:// or postgresql:// URL"},
		"tool name":    {&node.Config{DataDir: t.TempDir(), Tools: []tool.Tool{tool.Builtins()[0]}}, `Tools[0]: the name "shell" is taken`},
		"nil tool":     {&node.Config{DataDir: t.TempDir(), Tools: []tool.Tool{nil}}, "Tools[0] is nil"},
		"idempotency retention": {&node.Config{DataDir: t.TempDir(), IdempotencyRetention: 10 * time.Minute},
			"IdempotencyRetention 10m0s is under 1h0m0s"},
	} {
		_, err := node.Open(ctx, tc.cfg)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// TestOpenFailsCleanly: a failure after the lock was taken releases it.
func TestOpenFailsCleanly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	n, err := node.Open(ctx, &node.Config{DataDir: dir, Logger: quiet, Sandbox: node.SandboxLocal})
	require.NoError(t, err)
	_, err = node.Open(ctx, &node.Config{DataDir: dir, Logger: quiet, Sandbox: node.SandboxLocal})
	require.ErrorContains(t, err, "in use by another longhaul process")
	require.NoError(t, n.Close(ctx))

	// A vault key that does not decrypt what is stored fails Open after
	// the store was opened; the lock goes with it.
	_, err = node.Open(ctx, &node.Config{DataDir: dir, Logger: quiet, Sandbox: node.SandboxLocal, VaultKey: "not base64!"})
	require.ErrorContains(t, err, "vault key")
	n, err = node.Open(ctx, &node.Config{DataDir: dir, Logger: quiet, Sandbox: node.SandboxLocal})
	require.NoError(t, err)
	require.NoError(t, n.Close(ctx))
}

// TestUnreachablePostgreSQLIsAStoreOpenError: a caller can tell the store's
// failure from the rest (to add its hint), and the message names no
// password.
func TestUnreachablePostgreSQLIsAStoreOpenError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = node.Open(ctx, &node.Config{DataDir: t.TempDir(), Logger: quiet, Sandbox: node.SandboxLocal,
		StoreURL: "postgres://longhaul:s3cret@" + addr + "/longhaul?connect_timeout=5"})
	var se *node.StoreOpenError
	require.ErrorAs(t, err, &se)
	require.NotContains(t, err.Error(), "s3cret")
}

func TestLoadNodeID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id, err := node.LoadNodeID(dir)
	require.NoError(t, err)
	require.Regexp(t, `^node-[0-9a-f]{16}$`, id)
	again, err := node.LoadNodeID(dir)
	require.NoError(t, err)
	require.Equal(t, id, again)

	require.NoError(t, os.WriteFile(filepath.Join(dir, node.NodeIDFile), []byte("bad id!\n"), 0o600))
	_, err = node.LoadNodeID(dir)
	require.ErrorContains(t, err, "is not a valid node id")
}

// TestCheckSchema: an older schema is migrated only when asked; a missing
// SQLite database is an error for a command that only reads one.
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	_, err := node.OpenStore(ctx, node.StoreChoice{DataDir: dir}, nil, false)
	require.ErrorContains(t, err, "no Longhaul database at")

	s, err := node.OpenStore(ctx, node.StoreChoice{DataDir: dir}, nil, true)
	require.NoError(t, err)
	defer s.Close()
	require.ErrorContains(t, node.CheckSchema(ctx, s, false), "run `longhaul migrate` first")
	require.NoError(t, node.CheckSchema(ctx, s, true))
	require.NoError(t, node.CheckSchema(ctx, s, false), "migrated: up to date")
	current, known, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, known, current)
}

// TestNodeControlPlane: the node refuses to its sessions its own listener,
// the addresses other nodes announced in the store, the configured extra
// addresses, and the model key variables are the defaults plus the
// configured ones.
func TestNodeControlPlane(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	n, err := node.Open(ctx, &node.Config{
		DataDir: filepath.Join(t.TempDir(), "data"), Logger: quiet, Sandbox: node.SandboxLocal,
		ControlPlaneAddrs: []string{"10.9.9.9:443"},
	})
	require.NoError(t, err)
	defer n.Close(ctx)
	require.NoError(t, n.Serving(ctx, "127.0.0.1:18080"))
	require.Contains(t, n.ControlPlane.Check(ctx, "localhost", 18080), "the server's own API")
	require.Contains(t, n.ControlPlane.Check(ctx, "10.9.9.9", 443), "the server's control plane")
	require.Empty(t, n.ControlPlane.Check(ctx, "127.0.0.1", 18081))

	// Another node on the same store announces itself: read at the next
	// refresh.
	require.NoError(t, n.Store.NodeAnnounce(ctx, &store.NodeRow{ID: "node-other", Addrs: []string{"10.0.0.42:8080"}, AnnouncedAt: time.Now()}))
	rows, err := n.Store.NodeList(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	waitFor := time.Now().Add(2 * node.NodesRefreshInterval)
	for n.ControlPlane.Check(ctx, "10.0.0.42", 8080) == "" {
		require.True(t, time.Now().Before(waitFor), "the other node's address was never refused")
		time.Sleep(50 * time.Millisecond)
	}
	require.Contains(t, n.ControlPlane.Check(ctx, "10.0.0.42", 8080), "the API of a node of this server")

	_, err = node.Open(ctx, &node.Config{DataDir: t.TempDir(), Logger: quiet, Sandbox: node.SandboxLocal, ControlPlaneAddrs: []string{"nope"}})
	require.ErrorContains(t, err, "ControlPlaneAddrs")
	_, err = node.Open(ctx, &node.Config{DataDir: t.TempDir(), Logger: quiet, Sandbox: node.SandboxLocal, ModelKeyEnv: map[string][]string{"LONGHAUL_STORE": {"x.example.com"}}})
	require.ErrorContains(t, err, "LONGHAUL_STORE is the server's own configuration")
}

// TestNodePollInterval: the App's streams read their journals again every
// Config.PollInterval, else as often as the API pings, else by default.
func TestNodePollInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		ping, poll time.Duration
		want       time.Duration
	}{
		{"default", 0, 0, app.DefaultPollInterval},
		{"ping", 5 * time.Second, 0, 5 * time.Second},
		{"poll", 5 * time.Second, 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, err := node.Open(t.Context(), &node.Config{DataDir: t.TempDir(), Logger: quiet, Sandbox: node.SandboxLocal,
				PingInterval: tc.ping, PollInterval: tc.poll})
			require.NoError(t, err)
			defer func() { require.NoError(t, n.Close(context.WithoutCancel(t.Context()))) }()
			require.Equal(t, tc.want, n.PollInterval)
		})
	}
}
