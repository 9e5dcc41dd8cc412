package environment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSocketDirOwnedAlone: a proxy's socket goes only in a directory this
// process's user owns and only it may write in; one that others may write
// in (made first by another user of the machine, or loosened) is refused,
// as is a symlink.
func TestSocketDirOwnedAlone(t *testing.T) {
	t.Parallel()
	base := t.TempDir()

	fresh := filepath.Join(base, "fresh")
	require.NoError(t, ownSocketDir(fresh))
	fi, err := os.Stat(fresh)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.NoError(t, ownSocketDir(fresh), "its own directory, again")
	require.NoError(t, os.Chmod(fresh, 0o755))
	require.NoError(t, ownSocketDir(fresh), "others may read it, not write in it")

	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o1777))
	require.ErrorContains(t, ownSocketDir(open), "others may write in it")

	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(fresh, link))
	require.ErrorContains(t, ownSocketDir(link), "not a directory")

	b := &localBackend{cfg: LocalConfig{SocketDir: open}}
	_, err = b.socketPath("ses_1")
	require.ErrorContains(t, err, "others may write in it", "the backend refuses it too")
}
