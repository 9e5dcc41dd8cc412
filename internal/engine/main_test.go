package engine_test

import (
	"os"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
)

// TestMain lets the test binary be a stdio MCP server for the agents of the
// MCP tests (mcptest.ServeEnv).
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	os.Exit(m.Run())
}
