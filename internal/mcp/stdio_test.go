package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/mcp"
	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// testServerCommand runs this test binary as the stdio test server.
func testServerCommand(t *testing.T) (string, map[string]string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return mcp.CommandLine(exe, []string{"-test.run=^$"}), map[string]string{mcptest.ServeEnv: "1"}
}

// TestStdioServerInTheSandbox: a stdio server runs as a process of the
// session's sandbox in its workspace; when it dies mid-call the call's
// outcome is unknown, with its exit and its stderr as the reason, and the
// next call starts it again.
func TestStdioServerInTheSandbox(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	backend := sandbox.NewLocal()
	cmd, env := testServerCommand(t)
	d := &mcp.Stdio{
		Start: func(ctx context.Context, req *sandbox.StartRequest) (environment.Process, error) {
			return backend.Start(ctx, sandbox.Spec{SessionID: "ses_test", Workspace: ws}, req)
		},
		Command: cmd, Env: env,
	}
	m := newManager(t, d, &instantAfter{})
	ctx := t.Context()
	l, err := m.List(ctx, "test")
	require.NoError(t, err)
	require.Equal(t, "mcptest", l.ServerName)

	res := m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "record", Arguments: json.RawMessage(`{"note":"in the workspace"}`), IdempotencyKey: "k1"})
	require.Empty(t, res.Error)
	require.Equal(t, []string{"record k1 in the workspace"}, callLog(t, ws), "the server's working directory is the workspace")

	res = m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "crash_once", Arguments: json.RawMessage(`{}`), IdempotencyKey: "k2"})
	require.True(t, res.Unknown, "%+v", res)
	require.Contains(t, res.Lost, "exit status 3")
	require.Contains(t, res.Lost, "crashing as asked")
	res = m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "crash_once", Arguments: json.RawMessage(`{}`), IdempotencyKey: "k2"})
	require.Empty(t, res.Error)
	require.Equal(t, 2, m.Generation("test"))

	// A command that is not there: the server cannot start.
	bad := &mcp.Stdio{Start: d.Start, Command: mcp.CommandLine("/nonexistent/mcp-server", nil)}
	m2 := newManager(t, bad, &instantAfter{})
	_, err = m2.List(ctx, "test")
	require.ErrorContains(t, err, "MCP server test is unavailable")
	require.ErrorContains(t, err, "/nonexistent/mcp-server")
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	require.Equal(t, `exec 'npx' '-y' '@scope/pkg' 'it'\''s'`, mcp.CommandLine("npx", []string{"-y", "@scope/pkg", "it's"}))
}
