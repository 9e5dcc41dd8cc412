package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestMCPServerFromSandboxROPath: the README's MCP example, as it is
// written: a stdio server installed with npm outside the system
// directories starts in the bwrap sandbox once its directory is shown with
// --sandbox-ro-path; without it, the failure names the command and the
// setting, not a bare "exit status 127".
func TestMCPServerFromSandboxROPath(t *testing.T) {
	t.Parallel()
	needTools(t, "MCP servers in the bwrap sandbox go untested", "bwrap")
	bin := mcpEverything(t)
	// bin is PREFIX/node_modules/.bin/mcp-server-everything, as
	// `npm install --prefix PREFIX` leaves it.
	prefix := filepath.Dir(filepath.Dir(filepath.Dir(bin)))
	everything := lt.ToolSpec{Name: "everything", Type: "mcp", Command: bin, Args: []string{"stdio"},
		Effects: map[string]lt.EffectClass{"echo": lt.EffectRead}}
	req := func() *lt.CreateSessionRequest {
		return &lt.CreateSessionRequest{Input: "echo it", AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				toolCalls(toolCall("everything__echo", map[string]any{"message": "hello from the sandbox"})),
				finalText("done"))},
			Tools: []lt.ToolSpec{everything},
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	srv := startServer(t, "--sandbox", "bwrap", "--sandbox-ro-path", prefix)
	s := runSession(ctx, t, srv, req(), time.Minute)
	requireStatus(ctx, t, srv, s, lt.SessionIdle)
	done := eventsOf(ctx, t, srv.api, s.ID, lt.EventToolCompleted)
	require.Len(t, done, 1)
	require.Contains(t, string(done[0].Data), "hello from the sandbox", "the server ran in the sandbox and answered")

	hidden := startServer(t, "--sandbox", "bwrap")
	s = runSession(ctx, t, hidden, req(), time.Minute)
	var said string
	for _, ev := range journal(ctx, t, hidden.api, s.ID) {
		if d := string(ev.Data); strings.Contains(d, "is not visible in the sandbox") {
			said = d
			break
		}
	}
	require.NotEmpty(t, said, "the journal says why the server could not start")
	require.Contains(t, said, "--sandbox-ro-path")
}
