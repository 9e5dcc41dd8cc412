package engine_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// TestMain lets the test binary be a stdio MCP server for the agents of the
// MCP tests (mcptest.ServeEnv), and fails the package if any test leaves a
// goroutine running: an engine that is stopped, with its store closed, must
// have stopped everything it started. In a bwrap sandbox with network (the
// browser tests), the binary is also the proxy forwarder the sandbox runs,
// as the longhaul binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ForwardCommand {
		os.Exit(sandbox.ForwardMain(os.Args[2:]))
	}
	mcptest.MaybeServe()
	goleak.VerifyTestMain(m)
}
