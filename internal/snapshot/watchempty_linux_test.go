//go:build linux

package snapshot

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/inotify"
	"github.com/stretchr/testify/require"
)

// newEmptyWatchingCache returns a Cache that watches the workspaces it
// walks only while they are empty (CacheConfig.WatchEmptyRoots), skipping
// the test if this machine gives no inotify instance.
func newEmptyWatchingCache(t testing.TB, b Blobs) *Cache {
	t.Helper()
	ino, err := inotify.Open()
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		t.Skip("no inotify instance left on this machine")
	}
	require.NoError(t, err)
	ino.Close()
	c, err := NewCache(b, &CacheConfig{Now: func() time.Time { return farFuture }, WatchEmptyRoots: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// watchCount returns how many directories c watches.
func watchCount(c *Cache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nWatches
}

// TestEmptyWorkspaceWatchedUntilItHoldsSomething: an empty workspace is
// not walked after a writer the Cache was not told of that wrote nothing;
// what such a writer makes in it is in the next snapshot (the record of
// the empty directory is not returned), below a new directory too; once it holds something it is walked after every such
// writer (only its directory was watched), and watched again once empty.
func TestEmptyWorkspaceWatchedUntilItHoldsSomething(t *testing.T) {
	t.Parallel()
	b := newMemBlobs()
	c := newEmptyWatchingCache(t, b)
	ws := t.TempDir()
	st := requireSameAsWalk(t, b, c, ws, Options{})
	require.False(t, st.Incremental, "the first Take walks")
	require.Equal(t, 1, watchCount(c))

	shell(t, c, ws, "true")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.True(t, st.Incremental, "nothing written: no walk")

	shell(t, c, ws, "mkdir d && printf x > d/f")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.Equal(t, 1, st.Files)
	require.Zero(t, watchCount(c), "not empty: no longer watched")

	shell(t, c, ws, "printf y > d/f")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.False(t, st.Incremental, "walked after the writer")
	require.Equal(t, int64(1), st.ReadBytes, "the file written below the directory is read")

	shell(t, c, ws, "rm -r d")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.Zero(t, st.Files)
	require.Equal(t, 1, watchCount(c), "empty again: watched from its walk on")
	shell(t, c, ws, "printf z > g")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.False(t, st.Incremental, "told by the watch, and walked: empty before")
	require.Equal(t, 1, st.Files)
	require.Zero(t, watchCount(c))
}

// TestNonEmptyWorkspaceIsNotWatched: with WatchEmptyRoots only, the walk
// of a workspace that holds something leaves no watch behind, on its
// directory or below, and a writer the Cache was not told of makes the
// next Take walk.
func TestNonEmptyWorkspaceIsNotWatched(t *testing.T) {
	t.Parallel()
	b := newMemBlobs()
	c := newEmptyWatchingCache(t, b)
	ws := t.TempDir()
	writeFile(t, ws, "a/b/c.txt", []byte("c"), 0o644)
	writeFile(t, ws, "top.txt", []byte("t"), 0o644)
	st := requireSameAsWalk(t, b, c, ws, Options{})
	require.False(t, st.Incremental)
	require.Zero(t, watchCount(c))
	shell(t, c, ws, "printf changed > a/b/c.txt")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.False(t, st.Incremental)
	require.Equal(t, int64(len("changed")), st.ReadBytes)
}
