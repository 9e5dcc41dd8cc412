package snapshot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// newIncrementalCache returns a Cache whose clock makes every file old
// enough to cache.
func newIncrementalCache(t testing.TB, b Blobs) *Cache {
	t.Helper()
	c, err := NewCache(b, &CacheConfig{Now: func() time.Time { return farFuture }})
	require.NoError(t, err)
	return c
}

// requireSameAsWalk checks that an incremental Take of ws gives the
// snapshot, and the counts, of a walk of it without any cache.
func requireSameAsWalk(t *testing.T, b Blobs, c *Cache, ws string, opts Options) Stats {
	t.Helper()
	ctx := context.Background()
	opts.Cache, opts.Incremental = c, true
	got, gotSt, err := Take(ctx, b, ws, opts)
	require.NoError(t, err)
	opts.Cache, opts.Incremental = nil, false
	want, wantSt, err := Take(ctx, b, ws, opts)
	require.NoError(t, err)
	require.Equal(t, want, got, "incremental snapshot differs from the walk's")
	require.Equal(t, []any{wantSt.Files, wantSt.Dirs, wantSt.Symlinks, wantSt.Bytes, wantSt.Skipped},
		[]any{gotSt.Files, gotSt.Dirs, gotSt.Symlinks, gotSt.Bytes, gotSt.Skipped}, "counts")
	return gotSt
}

// TestIncrementalMatchesWalk writes files (existing ones, new ones, in new
// directories, removes some) telling the Cache, and checks after each round
// that the incremental snapshot is the walk's, reading only what was written.
func TestIncrementalMatchesWalk(t *testing.T) {
	t.Parallel()
	b := newMemBlobs()
	c := newIncrementalCache(t, b)
	ws := t.TempDir()
	for i := range 200 {
		writeFile(t, ws, fmt.Sprintf("d%d/e%d/f%d.txt", i%7, i%3, i), []byte(fmt.Sprintf("file %d", i)), 0o644)
	}
	writeFile(t, ws, "skip/me", []byte("excluded"), 0o644)
	require.NoError(t, os.Symlink("d1", filepath.Join(ws, "link")))
	opts := Options{Exclude: []string{"skip"}}
	requireSameAsWalk(t, b, c, ws, opts)

	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		var paths []string
		var read int64
		for k := range 1 + rng.IntN(4) {
			var p string
			switch rng.IntN(4) {
			case 0: // a new file in new directories
				p = fmt.Sprintf("new%d/n%d/x%d.txt", round, k, k)
			case 1: // an excluded path: no effect
				p = fmt.Sprintf("skip/r%d", round)
			case 2: // a removal
				p = fmt.Sprintf("d%d/e%d/f%d.txt", rng.IntN(7), rng.IntN(3), rng.IntN(200))
				c.NoteWrites(ws, p)
				require.NoError(t, os.RemoveAll(filepath.Join(ws, p)))
				c.NoteWrites(ws, p)
				continue
			default: // a rewrite, maybe of a removed file
				i := rng.IntN(200)
				p = fmt.Sprintf("d%d/e%d/f%d.txt", i%7, i%3, i)
			}
			data := []byte(fmt.Sprintf("round %d write %d", round, k))
			c.NoteWrites(ws, p)
			writeFile(t, ws, p, data, 0o644)
			c.NoteWrites(ws, p)
			if p[:4] != "skip" && !contains(paths, p) {
				read += int64(len(data))
			}
			paths = append(paths, p)
		}
		st := requireSameAsWalk(t, b, c, ws, opts)
		require.True(t, st.Incremental, "round %d", round)
		require.Equal(t, read, st.ReadBytes, "round %d reads only what was written", round)
	}
}

func requireWalked(t *testing.T, st Stats) {
	t.Helper()
	require.False(t, st.Incremental, "the Take must have walked")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestIncrementalTrustsTheWritesItIsTold proves an incremental Take does
// not walk: a change it was not told about is not in its snapshot. (That is
// the caller's promise; the engine keeps it, see BeginUnknownWrites.)
func TestIncrementalTrustsTheWritesItIsTold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	c := newIncrementalCache(t, b)
	ws := t.TempDir()
	writeFile(t, ws, "told.txt", []byte("one"), 0o644)
	writeFile(t, ws, "untold.txt", []byte("one"), 0o644)
	inc := Options{Cache: c, Incremental: true}
	first, _, err := Take(ctx, b, ws, inc)
	require.NoError(t, err)

	writeFile(t, ws, "untold.txt", []byte("two, unseen"), 0o644)
	same, st, err := Take(ctx, b, ws, inc)
	require.NoError(t, err)
	require.True(t, st.Incremental)
	require.Equal(t, first, same)
	require.Zero(t, st.ReadBytes)

	// Told: read even if its size and times were as before.
	writeFile(t, ws, "told.txt", []byte("two"), 0o644)
	c.NoteWrites(ws, "told.txt")
	id, st, err := Take(ctx, b, ws, inc)
	require.NoError(t, err)
	require.Equal(t, int64(3), st.ReadBytes)
	m, err := Load(ctx, b, id)
	require.NoError(t, err)
	require.Equal(t, sha256Hex([]byte("two")), m.Entries[0].SHA256)
	require.Equal(t, sha256Hex([]byte("one")), m.Entries[1].SHA256, "the untold change is not seen")
}

// TestIncrementalFallsBackToTheWalk covers what makes a Take walk: unknown
// writers, a restore, writes through symlinks or hard links, other options.
func TestIncrementalFallsBackToTheWalk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T) (*memBlobs, *Cache, string) {
		b := newMemBlobs()
		c := newIncrementalCache(t, b)
		ws := t.TempDir()
		writeFile(t, ws, "real/a.txt", []byte("a"), 0o644)
		writeFile(t, ws, "top.txt", []byte("top"), 0o644)
		requireSameAsWalk(t, b, c, ws, Options{})
		return b, c, ws
	}
	t.Run("unknown writes", func(t *testing.T) {
		b, c, ws := setup(t)
		end := c.BeginUnknownWrites(ws)
		writeFile(t, ws, "real/a.txt", []byte("shell"), 0o644)
		requireWalked(t, requireSameAsWalk(t, b, c, ws, Options{})) // during: keeps nothing
		writeFile(t, ws, "real/b.txt", []byte("after the take"), 0o644)
		end()
		requireWalked(t, requireSameAsWalk(t, b, c, ws, Options{}))
		require.True(t, requireSameAsWalk(t, b, c, ws, Options{}).Incremental, "and from then on, incremental again")
	})
	t.Run("forget", func(t *testing.T) {
		b, c, ws := setup(t)
		writeFile(t, ws, "top.txt", []byte("restored"), 0o644)
		c.Forget(ws)
		requireWalked(t, requireSameAsWalk(t, b, c, ws, Options{}))
	})
	t.Run("through a symlinked directory", func(t *testing.T) {
		b, c, ws := setup(t)
		require.NoError(t, os.Symlink("real", filepath.Join(ws, "link")))
		c.NoteWrites(ws, "link")
		requireSameAsWalk(t, b, c, ws, Options{})
		writeFile(t, ws, "link/a.txt", []byte("through the link"), 0o644)
		c.NoteWrites(ws, "link/a.txt")
		requireWalked(t, requireSameAsWalk(t, b, c, ws, Options{}))
	})
	// A second name for a file, then a write through the other one: the
	// name written is told, the other changes too.
	for _, c := range []struct {
		name        string
		link        func(ws string) error
		linked      string // the new name
		writeTo     string
		toldWritten string
	}{
		{"through a symlinked file", func(ws string) error { return os.Symlink("top.txt", filepath.Join(ws, "alias")) }, "alias", "alias", "alias"},
		{"hard link", func(ws string) error {
			return os.Link(filepath.Join(ws, "top.txt"), filepath.Join(ws, "real/hard.txt"))
		}, "real/hard.txt", "top.txt", "top.txt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, cache, ws := setup(t)
			require.NoError(t, c.link(ws))
			cache.NoteWrites(ws, c.linked)
			requireSameAsWalk(t, b, cache, ws, Options{})
			require.NoError(t, os.WriteFile(filepath.Join(ws, c.writeTo), []byte("through the other name"), 0o644))
			cache.NoteWrites(ws, c.toldWritten)
			requireWalked(t, requireSameAsWalk(t, b, cache, ws, Options{}))
		})
	}
	t.Run("a file replaced by a directory", func(t *testing.T) {
		b, c, ws := setup(t)
		require.NoError(t, os.Remove(filepath.Join(ws, "top.txt")))
		writeFile(t, ws, "top.txt/inner/x", []byte("x"), 0o644)
		c.NoteWrites(ws, "top.txt")
		requireSameAsWalk(t, b, c, ws, Options{})
	})
	t.Run("a special file", func(t *testing.T) {
		b, c, ws := setup(t)
		if err := mkfifo(filepath.Join(ws, "real/fifo")); err != nil {
			t.Skip(err)
		}
		c.NoteWrites(ws, "real/fifo")
		requireSameAsWalk(t, b, c, ws, Options{})
		writeFile(t, ws, "real/c.txt", []byte("next to a fifo"), 0o644)
		c.NoteWrites(ws, "real/c.txt")
		requireSameAsWalk(t, b, c, ws, Options{})
	})
	t.Run("other options", func(t *testing.T) {
		b, c, ws := setup(t)
		requireSameAsWalk(t, b, c, ws, Options{Exclude: []string{"real"}})
		writeFile(t, ws, "real/a.txt", []byte("untold, excluded before"), 0o644)
		requireWalked(t, requireSameAsWalk(t, b, c, ws, Options{}))
	})
	t.Run("an unclean path", func(t *testing.T) {
		b, c, ws := setup(t)
		writeFile(t, ws, "real/a.txt", []byte("written as ./real/a.txt"), 0o644)
		c.NoteWrites(ws, "./real/a.txt")
		requireWalked(t, requireSameAsWalk(t, b, c, ws, Options{}))
	})
	t.Run("over the total limit", func(t *testing.T) {
		b, c, ws := setup(t)
		_, _, err := Take(ctx, b, ws, Options{Cache: c, Incremental: true, MaxTotalBytes: 10})
		require.NoError(t, err)
		writeFile(t, ws, "real/big.txt", []byte("more than ten bytes"), 0o644)
		c.NoteWrites(ws, "real/big.txt")
		_, _, err = Take(ctx, b, ws, Options{Cache: c, Incremental: true, MaxTotalBytes: 10})
		require.ErrorIs(t, err, ErrTooLarge)
		require.ErrorContains(t, err, `"real/big.txt"`)
	})
}

// TestOverlappingTakesKeepNoStaleRecord: of two Takes of one workspace at
// once, only the one that started last may leave its record, and a Take
// that starts while another holds the record walks.
func TestOverlappingTakesKeepNoStaleRecord(t *testing.T) {
	t.Parallel()
	b := newMemBlobs()
	c := newIncrementalCache(t, b)
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", []byte("a"), 0o644)
	requireSameAsWalk(t, b, c, ws, Options{})
	key := rootKey(ws)

	first, _, gen1, _ := c.startTake(key)
	require.NotNil(t, first)
	second, _, gen2, _ := c.startTake(key)
	require.Nil(t, second, "the record is out: the second Take walks")
	c.NoteWrites(ws, "a.txt")
	c.endTake(key, first, gen1, false)
	require.Nil(t, c.roots[key].rec, "the first Take's record could miss what the second saw")
	c.endTake(key, &rootRecord{id: "second"}, gen2, false)
	require.Equal(t, "second", c.roots[key].rec.id)
	require.True(t, c.roots[key].dirty["a.txt"], "a write noted during a Take stays for the next")
}

// TestRecordsAreBounded: the records' entries count against MaxFiles, the
// least recently used record out first, and one over it alone is not kept.
func TestRecordsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	c, err := NewCache(b, &CacheConfig{MaxFiles: 10, Now: func() time.Time { return farFuture }})
	require.NoError(t, err)
	take := func(ws string) Stats {
		t.Helper()
		_, st, err := Take(ctx, b, ws, Options{Cache: c, Incremental: true})
		require.NoError(t, err)
		return st
	}
	spaces := make([]string, 4)
	for i := range spaces {
		spaces[i] = t.TempDir()
		files := 5
		if i == 3 {
			files = 11
		}
		for j := range files {
			writeFile(t, spaces[i], fmt.Sprintf("f%d", j), []byte("x"), 0o644)
		}
	}
	take(spaces[0])
	take(spaces[1])
	require.True(t, take(spaces[0]).Incremental, "two records of 5 entries fit")
	take(spaces[2]) // 15 entries: the least recently used, spaces[1], goes
	require.True(t, take(spaces[2]).Incremental)
	require.True(t, take(spaces[0]).Incremental)
	require.False(t, take(spaces[1]).Incremental)
	take(spaces[3])
	require.False(t, take(spaces[3]).Incremental, "over the bound alone: not kept")
}

func TestIncrementalNeedsACache(t *testing.T) {
	t.Parallel()
	_, _, err := Take(context.Background(), newMemBlobs(), t.TempDir(), Options{Incremental: true})
	require.ErrorContains(t, err, "Incremental needs a Cache")
}

// TestIncrementalUnderConcurrentWriters runs Takes while writers (as
// sub-agents sharing a workspace would) write told paths and a shell-like
// writer writes untold ones inside BeginUnknownWrites: once they are all
// done, an incremental Take must be the walk's.
func TestIncrementalUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	c, err := NewCache(b, nil) // the real clock: recent files are not cached
	require.NoError(t, err)
	ws := t.TempDir()
	for i := range 50 {
		writeFile(t, ws, fmt.Sprintf("d%d/f%d", i%5, i), []byte("start"), 0o644)
	}
	inc := Options{Cache: c, Incremental: true}
	_, _, err = Take(ctx, b, ws, inc)
	require.NoError(t, err)

	writers := make(chan struct{})
	var done sync.WaitGroup
	for w := range 3 {
		done.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 18))
			for k := range 60 {
				p := fmt.Sprintf("d%d/f%d", rng.IntN(6), rng.IntN(60))
				c.NoteWrites(ws, p)
				writeFile(t, ws, p, []byte(fmt.Sprintf("writer %d write %d", w, k)), 0o644)
				c.NoteWrites(ws, p)
			}
		})
	}
	done.Go(func() {
		for k := range 10 {
			end := c.BeginUnknownWrites(ws)
			writeFile(t, ws, fmt.Sprintf("shell/out%d", k%3), []byte(fmt.Sprintf("shell %d", k)), 0o644)
			end()
		}
	})
	var takers sync.WaitGroup
	for range 2 {
		takers.Go(func() {
			for {
				select {
				case <-writers:
					return
				default:
				}
				if _, _, err := Take(ctx, b, ws, inc); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done.Wait()
	close(writers)
	takers.Wait()
	requireSameAsWalk(t, b, c, ws, Options{})
}

// TestManyWorkspacesKeepTheLatestRecords: past MaxRecords workspaces, the
// records kept are the most recently used ones, their totals match what
// they hold, and the states of the workspaces whose records went are
// dropped, so a node's many sessions do not grow the Cache. The default
// bound and a larger one alike: a Cache told to keep records for more
// workspaces (a node running more sessions at once) keeps them all.
func TestManyWorkspacesKeepTheLatestRecords(t *testing.T) {
	t.Parallel()
	for _, maxRecords := range []int{0, 3 * DefaultCacheMaxRecords} {
		t.Run(fmt.Sprint(maxRecords), func(t *testing.T) {
			t.Parallel()
			keepsLatestRecords(t, maxRecords)
		})
	}
}

func keepsLatestRecords(t *testing.T, maxRecords int) {
	ctx := context.Background()
	b := newMemBlobs()
	c, err := NewCache(b, &CacheConfig{Now: func() time.Time { return farFuture }, MaxRecords: maxRecords})
	require.NoError(t, err)
	if maxRecords == 0 {
		maxRecords = DefaultCacheMaxRecords
	}
	parent := t.TempDir()
	spaces := make([]string, 5*maxRecords)
	for i := range spaces {
		spaces[i] = filepath.Join(parent, fmt.Sprintf("ws%d", i))
		writeFile(t, spaces[i], "f", []byte(fmt.Sprint(i)), 0o644)
		_, _, err := Take(ctx, b, spaces[i], Options{Cache: c, Incremental: true})
		require.NoError(t, err)
		c.BeginUnknownWrites(spaces[i])() // a state with nothing left to hold
	}
	for i := len(spaces) - maxRecords; i < len(spaces); i++ {
		_, _, err := Take(ctx, b, spaces[i], Options{Cache: c, Incremental: true})
		require.NoError(t, err)
	}
	c.mu.Lock()
	n, entries := 0, 0
	for _, s := range c.roots {
		if s.rec != nil {
			n++
			entries += s.rec.entries
			require.NotNil(t, s.lru)
		}
	}
	require.Equal(t, maxRecords, n)
	require.Equal(t, n, c.recLRU.Len())
	require.Equal(t, entries, c.recEntries)
	require.Less(t, len(c.roots), 2*minSweep(maxRecords), "the states holding nothing were dropped")
	c.mu.Unlock()
	for i := len(spaces) - 1; i >= len(spaces)-maxRecords; i-- {
		_, st, err := Take(ctx, b, spaces[i], Options{Cache: c, Incremental: true})
		require.NoError(t, err)
		require.True(t, st.Incremental, "workspace %d, among the latest", i)
	}
	_, st, err := Take(ctx, b, spaces[0], Options{Cache: c, Incremental: true})
	require.NoError(t, err)
	require.False(t, st.Incremental, "the oldest record went")
}
