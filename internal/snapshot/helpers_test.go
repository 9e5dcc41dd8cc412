package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// errBlobNotFound stands for store.ErrNotFound.
var errBlobNotFound = errors.New("blob not found")

// memBlobs is an in-memory Blobs that counts what it is asked.
type memBlobs struct {
	mu   sync.Mutex
	m    map[string][]byte
	puts int
	gets int
	has  int
}

func newMemBlobs() *memBlobs { return &memBlobs{m: make(map[string][]byte)} }

func (b *memBlobs) BlobPut(_ context.Context, d string, data []byte) error {
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != d {
		return errors.New("digest does not match the data")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.puts++
	if _, ok := b.m[d]; !ok {
		b.m[d] = append([]byte(nil), data...) // Take reuses its buffer
	}
	return nil
}

func (b *memBlobs) BlobGet(_ context.Context, d string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gets++
	data, ok := b.m[d]
	if !ok {
		return nil, errBlobNotFound
	}
	return append([]byte(nil), data...), nil
}

func (b *memBlobs) BlobHas(_ context.Context, d string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.has++
	_, ok := b.m[d]
	return ok, nil
}

// storedBytes is the sum of the sizes of all blobs held.
func (b *memBlobs) storedBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, v := range b.m {
		n += int64(len(v))
	}
	return n
}

// putRaw stores a hand-made blob and returns its digest.
func (b *memBlobs) putRaw(t *testing.T, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	d := hex.EncodeToString(sum[:])
	require.NoError(t, b.BlobPut(context.Background(), d, data))
	return d
}

// writeFile writes data to root/rel with perm, creating parents.
func writeFile(t testing.TB, root, rel string, data []byte, perm fs.FileMode) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, data, perm))
	require.NoError(t, os.Chmod(p, perm))
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// node describes one entry of a directory tree on disk.
type node struct {
	Type   string
	Perm   fs.FileMode
	Data   string // file content
	Target string // symlink target
}

// describe walks root without following symlinks and returns every entry
// by relative path (root itself excepted).
func describe(t *testing.T, root string) map[string]node {
	t.Helper()
	out := make(map[string]node)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out[filepath.ToSlash(rel)] = node{Type: TypeDir, Perm: fi.Mode().Perm()}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = node{Type: TypeFile, Perm: fi.Mode().Perm(), Data: string(data)}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = node{Type: TypeSymlink, Target: target}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// requireSameTree compares two directory trees entry by entry.
func requireSameTree(t *testing.T, want, got map[string]node) {
	t.Helper()
	var wantKeys, gotKeys []string
	for k := range want {
		wantKeys = append(wantKeys, k)
	}
	for k := range got {
		gotKeys = append(gotKeys, k)
	}
	sort.Strings(wantKeys)
	sort.Strings(gotKeys)
	require.Equal(t, wantKeys, gotKeys, "paths")
	for _, k := range wantKeys {
		w, g := want[k], got[k]
		require.Equal(t, w.Type, g.Type, "type of %s", k)
		require.Equal(t, w.Perm, g.Perm, "mode of %s", k)
		require.Equal(t, w.Target, g.Target, "target of %s", k)
		require.True(t, w.Data == g.Data, "content of %s differs (%d vs %d bytes)", k, len(w.Data), len(g.Data))
	}
}
