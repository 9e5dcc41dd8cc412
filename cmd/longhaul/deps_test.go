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

// TestCLIImportsNoStorageDriver keeps the storage drivers behind
// internal/node, the wiring the CLI shares with the Go library: the
// command's own files import none (its tests may).
func TestCLIImportsNoStorageDriver(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available")
	}
	const module = "github.com/longhaul-dev/longhaul"
	out, err := exec.Command(goTool, "list", "-f", `{{join .Imports "\n"}}`, module+"/cmd/longhaul").Output()
	require.NoError(t, err)
	imports := strings.Fields(string(out))
	require.Contains(t, imports, module+"/internal/node", "sanity: the list holds the command's imports")
	for _, imp := range imports {
		require.False(t, strings.HasPrefix(imp, module+"/internal/store/"), "cmd/longhaul imports %s: open stores through internal/node", imp)
	}
}
