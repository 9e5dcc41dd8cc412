package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientDeps keeps package client, which any program may import, free
// of server-side code: no storage driver, no SQLite, nothing internal. (Like
// Tailscale's cmd/tailscaled/deps_test.go, it asks the go command.)
func TestClientDeps(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available")
	}
	const module = "github.com/longhaul-dev/longhaul"
	out, err := exec.Command(goTool, "list", "-deps", module+"/client").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, module+"/longhaultype", "sanity: the list holds the module's packages")
	for _, dep := range deps {
		require.NotEqual(t, module+"/internal/store/sqlite", dep, "package client must not depend on the SQLite driver")
		require.False(t, strings.HasPrefix(dep, module+"/internal/"), "package client must not depend on %s", dep)
		require.False(t, strings.HasPrefix(dep, "modernc.org/"), "package client must not depend on %s", dep)
	}
}
