package node

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDataDirIsPrivate opens a node with a permissive umask over a data
// directory an older version left readable: afterwards nothing at its top
// is readable by another user.
func TestDataDirIsPrivate(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, NodeIDFile), []byte("node-old\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, WorkspacesDir), 0o755))

	n, err := Open(context.Background(), &Config{DataDir: dir, Sandbox: SandboxLocal, MinFreeMiB: -1})
	require.NoError(t, err)
	// A write, so the WAL exists.
	require.NoError(t, n.Start(context.Background()))
	require.NoError(t, n.Close(context.Background()))

	seen := 0
	for _, name := range []string{"", DBFile, LockFile, NodeIDFile, WorkspacesDir} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		seen++
		want := fs.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		require.Equal(t, want, fi.Mode().Perm(), "mode of %q", name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		require.Zero(t, fi.Mode().Perm()&0o077, "%s is %04o", e.Name(), fi.Mode().Perm())
	}
	require.Equal(t, 5, seen)
}
