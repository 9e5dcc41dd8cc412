package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingStore counts the writes a Take and a Claim make to the real
// SQLite store: each is a transaction of its own, a commit.
type countingStore struct {
	BatchBlobs
	owners BatchOwners

	mu                        sync.Mutex
	puts, putManys, manyBlobs int
	maxBlobs, maxBytes        int
	owns, ownTrees, ownAlls   int
}

func (c *countingStore) BlobPut(ctx context.Context, d string, data []byte) error {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.BatchBlobs.BlobPut(ctx, d, data)
}

func (c *countingStore) BlobPutMany(ctx context.Context, blobs map[string][]byte) error {
	c.mu.Lock()
	c.putManys++
	c.manyBlobs += len(blobs)
	size := 0
	for _, b := range blobs {
		size += len(b)
	}
	c.maxBlobs, c.maxBytes = max(c.maxBlobs, len(blobs)), max(c.maxBytes, size)
	c.mu.Unlock()
	return c.BatchBlobs.BlobPutMany(ctx, blobs)
}

func (c *countingStore) BlobOwn(ctx context.Context, p string, d []string) error {
	c.owns++
	return c.owners.BlobOwn(ctx, p, d)
}

func (c *countingStore) BlobOwnTrees(ctx context.Context, p string, d []string) error {
	c.ownTrees++
	return c.owners.BlobOwnTrees(ctx, p, d)
}

func (c *countingStore) BlobOwnAll(ctx context.Context, p string, blobs, trees []string) error {
	c.ownAlls++
	return c.owners.BlobOwnAll(ctx, p, blobs, trees)
}

func (c *countingStore) BlobsOwned(ctx context.Context, p string, d []string) (map[string]bool, error) {
	return c.owners.BlobsOwned(ctx, p, d)
}

func (c *countingStore) BlobOwnership(ctx context.Context, p string, d []string) (map[string]bool, error) {
	return c.owners.BlobOwnership(ctx, p, d)
}

// TestStepSnapshotIsOneCommit: the snapshot after a step that wrote a
// file stores its new blobs (the file's content, the trees on its way) in
// one transaction, and its claim for the project records them in one:
// two commits, not one a blob and two for the claim. What they store and
// record is what the blob-by-blob way did: the snapshot restores, and the
// project owns the root as a tree and the file's content for itself.
func TestStepSnapshotIsOneCommit(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	c := &countingStore{BatchBlobs: s, owners: s}
	ws, cache, opts, first := firstIncrementalTake(t, c, "src/main.go", "package main")
	_, err := Claim(ctx, c, c, "proj", first, ClaimOptions{})
	require.NoError(t, err)

	c.puts, c.putManys, c.manyBlobs, c.owns, c.ownTrees, c.ownAlls = 0, 0, 0, 0, 0, 0
	cache.NoteWrites(ws, "src/step.go")
	writeFile(t, ws, "src/step.go", []byte("package main // a step"), 0o644)
	cache.NoteWrites(ws, "src/step.go")
	id, st, err := Take(ctx, c, ws, opts)
	require.NoError(t, err)
	require.True(t, st.Incremental)
	require.Equal(t, 0, c.puts, "no blob stored on its own")
	require.Equal(t, 1, c.putManys)
	require.Equal(t, 3, c.manyBlobs, "the content, src's tree and the root's")
	require.Equal(t, 3, st.NewBlobs)
	n, err := Claim(ctx, c, c, "proj", id, ClaimOptions{})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, [3]int{0, 0, 1}, [3]int{c.owns, c.ownTrees, c.ownAlls}, "one call records the claim")
	kinds, err := s.BlobOwnership(ctx, "proj", []string{id, sha256Hex([]byte("package main // a step"))})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{id: true, sha256Hex([]byte("package main // a step")): false}, kinds)

	out := filepath.Join(t.TempDir(), "out")
	require.NoError(t, os.Mkdir(out, 0o755))
	_, err = Restore(ctx, s, id, out)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(out, "src", "step.go"))
	require.NoError(t, err)
	require.Equal(t, "package main // a step", string(data))

	// The same Take into a store that stores one blob at a time (a plain
	// Blobs): each on its own, as before.
	plain := &plainBlobs{b: s}
	cache2, err := NewCache(plain, nil)
	require.NoError(t, err)
	opts2 := Options{Cache: cache2, Incremental: true}
	_, _, err = Take(ctx, plain, ws, opts2)
	require.NoError(t, err)
	cache2.NoteWrites(ws, "src/other.go")
	writeFile(t, ws, "src/other.go", []byte("package main // other"), 0o644)
	cache2.NoteWrites(ws, "src/other.go")
	_, st, err = Take(ctx, plain, ws, opts2)
	require.NoError(t, err)
	require.True(t, st.Incremental)
	require.Equal(t, 3, plain.puts)
}

// plainBlobs is Blobs without BlobPutMany.
type plainBlobs struct {
	b    Blobs
	puts int
}

func (p *plainBlobs) BlobPut(ctx context.Context, d string, data []byte) error {
	p.puts++
	return p.b.BlobPut(ctx, d, data)
}
func (p *plainBlobs) BlobGet(ctx context.Context, d string) ([]byte, error) {
	return p.b.BlobGet(ctx, d)
}
func (p *plainBlobs) BlobHas(ctx context.Context, d string) (bool, error) {
	return p.b.BlobHas(ctx, d)
}

// TestStepSnapshotBatchesAreBounded: a step that made a whole new
// directory (a vendored tree) is still taken incrementally, its blobs in
// transactions bounded as a walk's are, so that the store's writer, shared
// with the sessions' appends, is never held long, nor the blobs' bytes
// kept in memory all at once. Found by a review (602 blobs, 19.7 MB in
// one).
func TestStepSnapshotBatchesAreBounded(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	c := &countingStore{BatchBlobs: s, owners: s}
	ws, cache, opts, _ := firstIncrementalTake(t, c, "README", "r")
	c.putManys, c.manyBlobs = 0, 0
	cache.NoteWrites(ws, "vendor")
	data := make([]byte, 32<<10)
	for i := range 600 {
		copy(data, fmt.Sprintf("file %d", i))
		writeFile(t, ws, fmt.Sprintf("vendor/f%03d", i), data, 0o644)
	}
	cache.NoteWrites(ws, "vendor")
	id, st, err := Take(ctx, c, ws, opts)
	require.NoError(t, err)
	require.True(t, st.Incremental)
	require.Equal(t, 601, st.Files)
	require.Equal(t, 602, c.manyBlobs, "600 files, vendor's tree and the root's")
	require.LessOrEqual(t, c.maxBlobs, maxBatchBlobs)
	require.LessOrEqual(t, c.maxBytes, maxBatchBytes)
	require.Greater(t, c.putManys, 1)
	out := t.TempDir()
	_, err = Restore(ctx, s, id, out)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(out, "vendor", "f599"))
	require.NoError(t, err)
	require.Equal(t, "file 599", string(got[:8]))
}

// firstIncrementalTake writes file (with content) into a new workspace and
// takes its first snapshot into b, with a Cache and Incremental set, so
// that the next Take, of the paths told to the Cache, is incremental. It
// returns the workspace, the Cache, the options and the snapshot.
func firstIncrementalTake(t *testing.T, b BatchBlobs, file, content string) (ws string, cache *Cache, opts Options, id string) {
	t.Helper()
	cache, err := NewCache(b, nil)
	require.NoError(t, err)
	ws = t.TempDir()
	writeFile(t, ws, file, []byte(content), 0o644)
	opts = Options{Cache: cache, Incremental: true}
	id, _, err = Take(context.Background(), b, ws, opts)
	require.NoError(t, err)
	return ws, cache, opts, id
}
