package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
)

// The store satisfies Blobs.
var _ Blobs = store.Store(nil)

// The measured workspace: 200 files of 50 KiB in 10 directories, 10 MiB.
const (
	dedupFiles     = 200
	dedupFileSize  = 10 << 20 / dedupFiles
	dedupWorkspace = dedupFiles * dedupFileSize
)

// farFuture is a cache clock for which every file is old enough to cache.
var farFuture = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func dedupPath(i int) string {
	return fmt.Sprintf("dir%02d/file%03d.dat", i%10, i)
}

func buildDedupWorkspace(tb testing.TB, root string) {
	tb.Helper()
	for i := range dedupFiles {
		writeFile(tb, root, dedupPath(i), randomBytes(uint64(1000+i), dedupFileSize), 0o644)
	}
}

// editOne overwrites 16 bytes of one file, the n-th edit, and gives it a
// modification time of its own so that a change within one tick of the
// file system clock is still seen.
func editOne(tb testing.TB, root string, n int) {
	tb.Helper()
	p := filepath.Join(root, filepath.FromSlash(dedupPath(n*37%dedupFiles)))
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	require.NoError(tb, err)
	_, err = f.WriteAt([]byte(fmt.Sprintf("edit %010d ...", n)), int64(n*1009%(dedupFileSize-16)))
	require.NoError(tb, err)
	require.NoError(tb, f.Close())
	mtime := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
	require.NoError(tb, os.Chtimes(p, mtime, mtime))
}

// TestDeduplicationOfCheckpoints measures what 100 checkpoints of a 10 MiB
// workspace cost when each follows a small edit.
func TestDeduplicationOfCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	cache, err := NewCache(b, &CacheConfig{Now: func() time.Time { return farFuture }})
	require.NoError(t, err)
	ws := t.TempDir()
	buildDedupWorkspace(t, ws)

	const checkpoints = 100
	ids := make([]string, 0, checkpoints+1)
	id, st, err := Take(ctx, b, ws, Options{Cache: cache})
	require.NoError(t, err)
	require.Equal(t, int64(dedupWorkspace), st.Bytes)
	ids = append(ids, id)
	first := b.storedBytes()

	var read int64
	var at50 map[string]node
	for n := 1; n <= checkpoints; n++ {
		editOne(t, ws, n)
		id, st, err := Take(ctx, b, ws, Options{Cache: cache})
		require.NoError(t, err)
		require.NotEqual(t, ids[len(ids)-1], id, "checkpoint %d saw its edit", n)
		ids = append(ids, id)
		read += st.ReadBytes
		if n == 50 {
			at50 = describe(t, ws)
		}
	}
	total := b.storedBytes()
	t.Logf("%d checkpoints of a %d-byte workspace (%d files), one 16-byte edit before each: "+
		"%d bytes stored in %d blobs (%.2f× the workspace; the first snapshot %d bytes, then %d bytes per checkpoint); "+
		"%d bytes read after the first snapshot",
		checkpoints, dedupWorkspace, dedupFiles, total, len(b.m), float64(total)/dedupWorkspace,
		first, (total-first)/checkpoints, read)
	require.Less(t, total, int64(2*dedupWorkspace), "a hundred checkpoints must cost less than twice the workspace")
	require.Less(t, read, int64(2*checkpoints*dedupFileSize), "the cache spares reading unchanged files")

	// Any checkpoint restores to what the workspace was then.
	dst := t.TempDir()
	_, err = Restore(ctx, b, ids[50], dst)
	require.NoError(t, err)
	requireSameTree(t, at50, describe(t, dst))
	_, err = Restore(ctx, b, ids[checkpoints], dst)
	require.NoError(t, err)
	requireSameTree(t, describe(t, ws), describe(t, dst))
}

// BenchmarkSnapshot takes a checkpoint after a small edit of the 10 MiB
// workspace and reports what each one stored.
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	blobs := newMemBlobs()
	cache, err := NewCache(blobs, &CacheConfig{Now: func() time.Time { return farFuture }})
	require.NoError(b, err)
	ws := b.TempDir()
	buildDedupWorkspace(b, ws)
	_, _, err = Take(ctx, blobs, ws, Options{Cache: cache})
	require.NoError(b, err)
	first := blobs.storedBytes()

	n := 0
	for b.Loop() {
		n++
		editOne(b, ws, n)
		if _, _, err := Take(ctx, blobs, ws, Options{Cache: cache}); err != nil {
			b.Fatal(err)
		}
	}
	total := blobs.storedBytes()
	b.ReportMetric(float64(total-first)/float64(n), "stored-B/checkpoint")
	b.ReportMetric(float64(total)/dedupWorkspace, "stored/workspace")
}

func TestCacheSkipsUnchangedFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	cache, err := NewCache(b, &CacheConfig{Now: func() time.Time { return farFuture }})
	require.NoError(t, err)
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", []byte("aaaa"), 0o644)
	writeFile(t, ws, "d/b.txt", []byte("bbbb"), 0o644)

	id1, st, err := Take(ctx, b, ws, Options{Cache: cache})
	require.NoError(t, err)
	require.Equal(t, int64(8), st.ReadBytes)
	has := b.has
	id2, st, err := Take(ctx, b, ws, Options{Cache: cache})
	require.NoError(t, err)
	require.Equal(t, id1, id2)
	require.Zero(t, st.ReadBytes, "unchanged files are not read")
	require.Equal(t, has, b.has, "known blobs are not asked about")

	// Same size, same modification time, other bytes: only the change time
	// tells. Rewrite until the file system clock has ticked.
	p := filepath.Join(ws, "a.txt")
	before, err := os.Lstat(p)
	require.NoError(t, err)
	idBefore, ok := identify(before)
	if !ok {
		t.Skip("no change times on this platform")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		require.NoError(t, os.WriteFile(p, []byte("AAAA"), 0o644))
		require.NoError(t, os.Chtimes(p, before.ModTime(), before.ModTime()))
		after, err := os.Lstat(p)
		require.NoError(t, err)
		idAfter, _ := identify(after)
		if idAfter.ctime != idBefore.ctime {
			require.Equal(t, idBefore.mtime, idAfter.mtime)
			break
		}
		require.True(t, time.Now().Before(deadline), "the change time never moved")
	}
	id3, st, err := Take(ctx, b, ws, Options{Cache: cache})
	require.NoError(t, err)
	require.NotEqual(t, id1, id3)
	require.Equal(t, int64(4), st.ReadBytes, "only the rewritten file is read")
	m, err := Load(ctx, b, id3)
	require.NoError(t, err)
	require.Equal(t, sha256Hex([]byte("AAAA")), m.Entries[0].SHA256)
}

func TestCacheIgnoresRecentlyChangedFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	ws := t.TempDir()
	writeFile(t, ws, "young.txt", []byte("young"), 0o644)
	fi, err := os.Lstat(filepath.Join(ws, "young.txt"))
	require.NoError(t, err)
	// The clock says the file changed a second ago: a write in the same
	// tick could follow unseen, so its digests must not be kept.
	now := fi.ModTime().Add(time.Second)
	cache, err := NewCache(b, &CacheConfig{Now: func() time.Time { return now }})
	require.NoError(t, err)
	for range 2 {
		_, st, err := Take(ctx, b, ws, Options{Cache: cache})
		require.NoError(t, err)
		require.Equal(t, int64(5), st.ReadBytes, "read every time")
	}
	require.Empty(t, cache.files)
}

func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	cache, err := NewCache(b, &CacheConfig{MaxFiles: 2, MaxBlobs: 3, Now: func() time.Time { return farFuture }})
	require.NoError(t, err)
	ws := t.TempDir()
	for i := range 5 {
		writeFile(t, ws, fmt.Sprintf("f%d", i), []byte(fmt.Sprintf("file %d", i)), 0o644)
	}
	id1, _, err := Take(ctx, b, ws, Options{Cache: cache})
	require.NoError(t, err)
	require.Len(t, cache.files, 2)
	require.Equal(t, 2, cache.fileLRU.Len())
	require.Len(t, cache.known, 3)
	id2, st, err := Take(ctx, b, ws, Options{Cache: cache})
	require.NoError(t, err)
	require.Equal(t, id1, id2, "evictions cost reads, never correctness")
	require.Positive(t, st.ReadBytes)
}

// openSQLiteBlobs opens a SQLite store, as the engine's, under the test's
// temporary directory.
func openSQLiteBlobs(tb testing.TB) *sqlite.Store {
	tb.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "longhaul.db"), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	require.NoError(tb, s.Migrate(ctx))
	return s
}

// TestWithSQLiteStore runs checkpoints against the real store.
func TestWithSQLiteStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openSQLiteBlobs(t)

	ws := t.TempDir()
	buildWorkspace(t, ws)
	want := describe(t, ws)
	id, st, err := Take(ctx, s, ws, Options{})
	require.NoError(t, err)
	require.Positive(t, st.NewBytes)
	_, st, err = Take(ctx, s, ws, Options{})
	require.NoError(t, err)
	require.Zero(t, st.NewBytes, "the store already holds everything")

	dst := filepath.Join(t.TempDir(), "ws")
	_, err = Restore(ctx, s, id, dst)
	require.NoError(t, err)
	requireSameTree(t, want, describe(t, dst))
}
