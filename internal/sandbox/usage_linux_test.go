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

// mkdirChain makes n directories d/d/d/... under dir, each holding an empty
// file f as well, through descriptors (the chain's path may be longer than
// a path may be).
func mkdirChain(t *testing.T, dir string, n int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	for range n {
		require.NoError(t, unix.Mkdirat(fd, "d", 0o755))
		f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		require.NoError(t, err)
		unix.Close(f)
		sub, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		require.NoError(t, err)
		fd = sub
	}
	unix.Close(fd)
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// TestScanMeasuresDeepTrees: a tree nested far deeper than a walk holds
// directories open (the old walk's limit was 256 levels) is measured
// whole, every file of every level counted, with at most maxOpenDirs
// directories open at once. Not parallel: it counts the process's
// descriptors.
func TestScanMeasuresDeepTrees(t *testing.T) {
	ws := t.TempDir()
	const levels = 1000
	mkdirChain(t, ws, levels)
	base := openFDs(t)
	most := 0
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	s := &scanner{seen: map[[2]uint64]bool{}, opened: func(int, string) { most = max(most, openFDs(t)-base) }}
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	s.count(&st)
	require.NoError(t, s.walk(fd, 0))
	var want int64
	require.NoError(t, filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		want += entryBytes(&st)
		return nil
	}))
	require.Equal(t, want, s.total)
	require.GreaterOrEqual(t, s.total, int64(2*levels+1)*minEntryBytes, "every directory and file of every level")
	require.LessOrEqual(t, most, maxOpenDirs+2, "descriptors held by the walk")
	require.Equal(t, base, openFDs(t), "the walk closed every descriptor")
}
