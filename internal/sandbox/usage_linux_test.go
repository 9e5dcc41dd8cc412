package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestScanSkipsADirectoryRemovedMeanwhile: a directory removed between
// being opened and being read (a command removing a tree while the quota
// monitor walks it) counts as gone, not as an unmeasurable workspace, which
// would stop the command that is freeing it.
func TestScanSkipsADirectoryRemovedMeanwhile(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	gone := filepath.Join(ws, "gone")
	require.NoError(t, os.Mkdir(gone, 0o755))
	fd, err := unix.Open(gone, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, os.Remove(gone))
	s := &scanner{seen: map[[2]uint64]bool{}}
	require.NoError(t, s.walk(fd, 1), "a subdirectory removed meanwhile")

	// The workspace itself is not allowed to vanish.
	root := filepath.Join(ws, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	fd, err = unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, os.Remove(root))
	require.ErrorContains(t, s.walk(fd, 0), "read workspace directory")
}
