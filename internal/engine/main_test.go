package engine_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
)

// TestMain lets the test binary be a stdio MCP server for the agents of the
// MCP tests (mcptest.ServeEnv), and fails the package if any test leaves a
// goroutine running: an engine that is stopped, with its store closed, must
// have stopped everything it started.
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	goleak.VerifyTestMain(m)
}
