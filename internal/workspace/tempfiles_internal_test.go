package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/stretchr/testify/require"
)

// memBlobs is a snapshot store in memory.
type memBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (b *memBlobs) BlobPut(_ context.Context, sum string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[sum] = append([]byte(nil), data...)
	return nil
}

func (b *memBlobs) BlobGet(_ context.Context, sum string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.m[sum]
	if !ok {
		return nil, os.ErrNotExist
	}
	return data, nil
}

func (b *memBlobs) BlobHas(_ context.Context, sum string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.m[sum]
	return ok, nil
}

// TestTempFileToldToTheSnapshotCache: a snapshot that walks the
// workspace while a write's temporary file exists (the first after a
// shell command, taken by a sub-agent sharing the workspace) lists that
// file. Told of it by OnTempFiles, as the Environment tells the
// destination, the snapshot Cache reads its path again, and the next
// snapshot, incremental, has no such entry. Told of the destination
// only, the Cache kept the entry in every incremental snapshot after,
// and a restore would have made the junk file again. The commit check
// is where the snapshot is taken: the temporary file is complete there,
// and is renamed, linked in or removed right after.
func TestTempFileToldToTheSnapshotCache(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit func() (bool, error)
		files  []string // in w/ once the write is over
	}{
		{"renamed", func() (bool, error) { return false, nil }, []string{"b.txt"}},
		{"linked", func() (bool, error) { return true, nil }, []string{"b.txt"}},
		{"abandoned", func() (bool, error) { return false, errNotBasis }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(dir, "w"), 0o755))
			blobs := &memBlobs{m: make(map[string][]byte)}
			cache, err := snapshot.NewCache(blobs, nil)
			require.NoError(t, err)
			take := func() (string, snapshot.Stats) {
				id, st, err := snapshot.Take(ctx, blobs, dir, snapshot.Options{Cache: cache, Incremental: true})
				require.NoError(t, err)
				return id, st
			}
			take() // the record the next snapshots start from

			d, err := Open(dir)
			require.NoError(t, err)
			defer d.Close()
			d.OnTempFiles(func(tmp string) { cache.NoteWrites(dir, tmp) })
			// The destination told before and after, as the Environment does.
			cache.NoteWrites(dir, "w/b.txt")
			var during snapshot.Stats
			err = d.writeFile("w/b.txt", []byte("b"), func(string) (bool, error) {
				cache.BeginUnknownWrites(dir)() // a shell command ran: the next snapshot walks
				_, during = take()
				return tc.commit()
			})
			cache.NoteWrites(dir, "w/b.txt")
			if tc.name == "abandoned" {
				require.ErrorIs(t, err, errNotBasis)
			} else {
				require.NoError(t, err)
			}
			require.False(t, during.Incremental)
			require.Equal(t, 2, during.Files, "the walk met a.txt and the temporary file")

			id, st := take()
			require.True(t, st.Incremental, "a write costs what it changed, not a walk")
			require.Equal(t, 1+len(tc.files), st.Files, "no temporary file in the snapshot")
			entries, err := snapshot.ListDir(ctx, blobs, id, "w")
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				require.False(t, strings.HasSuffix(e.Path, ".tmp"), "entry %s", e.Path)
				names = append(names, strings.TrimPrefix(e.Path, "w/"))
			}
			require.Equal(t, tc.files, names)

			cache.Forget(dir)
			walked, _ := take()
			require.Equal(t, walked, id, "the incremental snapshot is the one a walk takes")
		})
	}
}
