package snapshot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The large workspace of the benchmarks below stands for a real
// repository (issue 18 measured a copy of the Go toolchain's tree): 15,000
// files of 1 to 35 KiB (about 270 MB) in 600 directories three levels deep.
// It is generated under the test's temporary directory (TMPDIR).
const (
	largeTreeFiles = 15_000
	largeTreeDirs  = 600
)

// buildLargeTree fills root with the large workspace; the content is
// pseudo-random (nothing deduplicates by chance) and the same every time.
func buildLargeTree(tb testing.TB, root string) {
	tb.Helper()
	src := rand.NewChaCha8([32]byte{18})
	rng := rand.New(src)
	buf := make([]byte, 35<<10)
	for i := range largeTreeFiles {
		d := i % largeTreeDirs
		dir := filepath.Join(root, fmt.Sprintf("pkg%02d", d%20), fmt.Sprintf("sub%02d", d/20%6), fmt.Sprintf("leaf%d", d/120))
		if i < largeTreeDirs {
			require.NoError(tb, os.MkdirAll(dir, 0o755))
		}
		data := buf[:1<<10+rng.IntN(34<<10)]
		_, _ = src.Read(data)
		require.NoError(tb, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.go", i)), data, 0o644))
	}
}

// agedCache returns a Cache whose clock runs an hour ahead: the tree just
// generated counts as old enough to cache, as a real one is by its second
// checkpoint (a file changed in the last two seconds is read every time).
func agedCache(b *testing.B, s Blobs) *Cache {
	b.Helper()
	cache, err := NewCache(s, &CacheConfig{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	require.NoError(b, err)
	return cache
}

// BenchmarkFirstSnapshotLargeTree is the first checkpoint of a workspace
// holding the large tree: every file read, chunked and stored in SQLite.
func BenchmarkFirstSnapshotLargeTree(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 270 MB tree")
	}
	ws := b.TempDir()
	buildLargeTree(b, ws)
	ctx := context.Background()
	var cpu time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		s := openSQLiteBlobs(b)
		cache, err := NewCache(s, nil)
		require.NoError(b, err)
		before := processCPU(b)
		b.StartTimer()
		_, st, err := Take(ctx, s, ws, Options{Cache: cache, Incremental: true})
		b.StopTimer()
		cpu += processCPU(b) - before
		n++
		b.StartTimer()
		require.NoError(b, err)
		require.Equal(b, largeTreeFiles, st.Files)
		b.ReportMetric(float64(st.Bytes)/1e6, "MB")
	}
	// On a shared machine the wall time follows the load; the CPU time
	// (user and system, all threads) much less.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(n), "cpu-ms/op")
}

// BenchmarkWriteFileStepSnapshot is the checkpoint after a write_file step
// (one file written, its path told to the Cache), in an empty workspace and
// in one holding the large tree; "walk" is the same checkpoint as it was
// taken before incremental snapshots: a walk that skips the files the stat
// cache vouches for.
func BenchmarkWriteFileStepSnapshot(b *testing.B) {
	for _, c := range []struct {
		name        string
		large       bool
		incremental bool
	}{
		{"empty/incremental", false, true},
		{"large/incremental", true, true},
		{"empty/walk", false, false},
		{"large/walk", true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.large && testing.Short() {
				b.Skip("builds a 270 MB tree")
			}
			ws := b.TempDir()
			if c.large {
				buildLargeTree(b, ws)
			}
			s := openSQLiteBlobs(b)
			cache := agedCache(b, s)
			ctx := context.Background()
			opts := Options{Cache: cache, Incremental: c.incremental}
			_, _, err := Take(ctx, s, ws, opts)
			require.NoError(b, err)
			n := 0
			for b.Loop() {
				n++
				p := fmt.Sprintf("notes/step%d.md", n%30)
				cache.NoteWrites(ws, p)
				writeFile(b, ws, p, []byte(fmt.Sprintf("step %d", n)), 0o644)
				cache.NoteWrites(ws, p)
				if _, _, err := Take(ctx, s, ws, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShellStepSnapshot is the checkpoint after a shell step that
// changed one file of the large tree: its writes are unknown. "walk" is the
// Cache without watches: the workspace is walked, reading only the files
// whose stat changed; "watched" is the Cache watching the workspace
// (CacheConfig.Watch): the kernel tells what changed, and only that is
// looked at.
func BenchmarkShellStepSnapshot(b *testing.B) {
	for _, watch := range []bool{false, true} {
		name := "walk"
		if watch {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			if testing.Short() {
				b.Skip("builds a 270 MB tree")
			}
			ws := b.TempDir()
			buildLargeTree(b, ws)
			s := openSQLiteBlobs(b)
			cache, err := NewCache(s, &CacheConfig{Now: func() time.Time { return time.Now().Add(time.Hour) }, Watch: watch})
			require.NoError(b, err)
			b.Cleanup(func() { cache.Close() })
			ctx := context.Background()
			opts := Options{Cache: cache, Incremental: true}
			_, _, err = Take(ctx, s, ws, opts)
			require.NoError(b, err)
			n := 0
			var read int64
			for b.Loop() {
				n++
				end := cache.BeginUnknownWrites(ws)
				writeFile(b, ws, "pkg03/sub00/leaf0/f00003.go", []byte(fmt.Sprintf("shell %d", n)), 0o644)
				end()
				_, st, err := Take(ctx, s, ws, opts)
				if err != nil {
					b.Fatal(err)
				}
				if st.Incremental != (watch && runtime.GOOS == "linux") {
					b.Fatalf("incremental %v: a Take after unknown writes walks unless watched", st.Incremental)
				}
				read += st.ReadBytes
			}
			b.ReportMetric(float64(read)/float64(n), "read-B/op")
		})
	}
}
