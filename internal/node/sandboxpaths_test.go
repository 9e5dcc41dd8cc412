package node

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A read-only sandbox path may show neither the data directory nor the
// vault's key, nor a directory holding one, even through a symlink.
func TestSandboxROPathsKeepTheServersSecrets(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data := filepath.Join(root, "data")
	keys := filepath.Join(root, "keys")
	tools := filepath.Join(root, "tools")
	for _, d := range []string{data, keys, tools} {
		require.NoError(t, os.Mkdir(d, 0o700))
	}
	key := filepath.Join(keys, "vault.key")
	require.NoError(t, os.WriteFile(key, []byte("k"), 0o600))
	require.NoError(t, os.Symlink(data, filepath.Join(root, "link-to-data")))

	got, err := checkSandboxROPaths([]string{tools}, data, key)
	require.NoError(t, err)
	require.Equal(t, []string{tools}, got)
	for _, p := range []string{data, filepath.Join(data, "workspaces"), root, keys, key, filepath.Join(root, "link-to-data")} {
		if p == filepath.Join(data, "workspaces") {
			require.NoError(t, os.MkdirAll(p, 0o700))
		}
		_, err := checkSandboxROPaths([]string{tools, p}, data, key)
		require.ErrorContains(t, err, "it would show the sandbox the server's data directory or vault key", p)
	}
	_, err = checkSandboxROPaths([]string{"/etc"}, data, key)
	require.ErrorContains(t, err, `--sandbox-ro-path "/etc"`)
}
