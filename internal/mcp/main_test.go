package mcp_test

import (
	"os"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
)

// TestMain lets the test binary be a stdio MCP server (mcptest.ServeEnv).
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	os.Exit(m.Run())
}
