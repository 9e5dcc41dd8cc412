package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/workspace"
)

func TestManagerEnsurePathRemove(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "workspaces")
	m, err := workspace.New(root)
	require.NoError(t, err)
	require.Equal(t, root, m.Root())

	dir, err := m.Ensure("ses_01ABC-x")
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(dir))
	require.Equal(t, filepath.Join(root, "ses_01ABC-x"), dir)
	require.Equal(t, dir, m.Path("ses_01ABC-x"))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	// Ensure is idempotent and keeps what is inside.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("x"), 0o644))
	again, err := m.Ensure("ses_01ABC-x")
	require.NoError(t, err)
	require.Equal(t, dir, again)
	require.FileExists(t, filepath.Join(dir, "keep.txt"))

	require.NoError(t, m.Remove("ses_01ABC-x"))
	require.NoDirExists(t, dir)
	require.NoError(t, m.Remove("ses_01ABC-x"), "removing a missing workspace is not an error")
}

func TestManagerRejectsBadSessionIDs(t *testing.T) {
	t.Parallel()
	m, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	for _, id := range []string{"", ".", "..", "../x", "a/b", "a\\b", "/abs", "a b", "ses\x00", "é", string(make([]byte, 129))} {
		_, err := m.Ensure(id)
		require.Error(t, err, "id %q", id)
		require.Empty(t, m.Path(id), "id %q", id)
		require.Error(t, m.Remove(id), "id %q", id)
	}
}

func TestManagerEnsureRefusesSymlinkedWorkspace(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := t.TempDir()
	m, err := workspace.New(root)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "ses_evil")))
	_, err = m.Ensure("ses_evil")
	require.ErrorContains(t, err, "not a directory")
}

func TestManagerOpen(t *testing.T) {
	t.Parallel()
	m, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	d, err := m.Open("ses_1")
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, m.Path("ses_1"), d.Path())
	require.NoError(t, d.WriteFile("a.txt", []byte("hi")))
	require.FileExists(t, filepath.Join(m.Path("ses_1"), "a.txt"))
}
