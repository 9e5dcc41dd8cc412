package snapshot

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBrowse: a directory or a file of a stored snapshot is read without a
// restore; symlinks are described and never followed; a tampered chunk is
// an error, never wrong bytes.
func TestBrowse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	root := t.TempDir()
	big := randomBytes(7, 3<<20) // several chunks
	writeFile(t, root, "a/b/big.bin", big, 0o644)
	writeFile(t, root, "a/small.txt", []byte("small"), 0o600)
	require.NoError(t, os.Symlink("b", filepath.Join(root, "a", "link")))
	id, _, err := Take(ctx, b, root, Options{})
	require.NoError(t, err)

	top, err := ListDir(ctx, b, id, ".")
	require.NoError(t, err)
	require.Len(t, top, 1)
	require.Equal(t, Entry{Path: "a", Type: TypeDir, Mode: top[0].Mode, SHA256: top[0].SHA256}, top[0])
	a, err := ListDir(ctx, b, id, "a")
	require.NoError(t, err)
	require.Equal(t, []string{"a/b", "a/link", "a/small.txt"}, []string{a[0].Path, a[1].Path, a[2].Path})
	require.Equal(t, "b", a[1].Target)
	require.Equal(t, fs.FileMode(0o600), a[2].Mode)

	e, err := Lookup(ctx, b, id, "a/b/big.bin")
	require.NoError(t, err)
	require.Greater(t, len(e.Chunks), 1)
	var out bytes.Buffer
	require.NoError(t, CopyFile(ctx, b, e, &out))
	require.Equal(t, big, out.Bytes())

	_, err = Lookup(ctx, b, id, "a/link/big.bin")
	require.ErrorIs(t, err, ErrThroughSymlink)
	_, err = Lookup(ctx, b, id, "a/missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = Lookup(ctx, b, id, "a/small.txt/x")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = Lookup(ctx, b, id, "a/../a")
	require.Error(t, err)
	_, err = ListDir(ctx, b, id, "a/small.txt")
	require.ErrorContains(t, err, "not a directory")

	// A chunk the store hands back changed is refused.
	b.m[e.Chunks[1].SHA256] = bytes.Repeat([]byte{1}, int(e.Chunks[1].Size))
	out.Reset()
	err = CopyFile(ctx, b, e, &out)
	require.ErrorContains(t, err, "the store returned other bytes")
	require.False(t, errors.Is(err, fs.ErrNotExist))
}
