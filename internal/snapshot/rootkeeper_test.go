package snapshot

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// rootBlobs is a memBlobs that keeps the roots Take tells it.
type rootBlobs struct {
	*memBlobs
	roots map[string][]byte
}

func (b *rootBlobs) KeepRoot(id string, tree []byte) { b.roots[id] = tree }

// TestTakeTellsItsRoot: every Take tells a RootKeeper its root tree, even
// when the store had it already and when nothing was written since the
// last Take (incremental, nothing encoded): a runner must send those
// bytes to prove it holds the snapshot.
func TestTakeTellsItsRoot(t *testing.T) {
	ctx := context.Background()
	b := &rootBlobs{memBlobs: newMemBlobs(), roots: map[string][]byte{}}
	c := newIncrementalCache(t, b)
	ws := t.TempDir()
	writeFile(t, ws, "a/b.txt", []byte("hello"), 0o644)
	opts := Options{Cache: c, Incremental: true}
	for i := range 3 {
		clear(b.roots)
		id, _, err := Take(ctx, b, ws, opts)
		require.NoError(t, err)
		require.Len(t, b.roots, 1, "take %d", i)
		require.Equal(t, id, sha256Hex(b.roots[id]), "take %d", i)
	}
	c.NoteWrites(ws, "c.txt")
	writeFile(t, ws, "c.txt", []byte("more"), 0o644)
	c.NoteWrites(ws, "c.txt")
	clear(b.roots)
	id, _, err := Take(ctx, b, ws, opts)
	require.NoError(t, err)
	require.Equal(t, id, sha256Hex(b.roots[id]))
	clear(b.roots)
	_, _, err = Take(ctx, b, ws, Options{}) // a walk, the store has it all
	require.NoError(t, err)
	require.Equal(t, id, sha256Hex(b.roots[id]))
}
