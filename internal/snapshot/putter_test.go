package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// batchBlobs is a memBlobs that also stores batches (as store.Store does),
// whose first BlobHas closes held and then waits for gate: the blobs queued
// meanwhile are there for the putter to batch. failBatch fails every batch.
type batchBlobs struct {
	*memBlobs
	gate      chan struct{}
	held      chan struct{}
	gateOnce  sync.Once
	failBatch bool

	mu      sync.Mutex
	batches []int // the size of each batch stored
}

func (b *batchBlobs) BlobHas(ctx context.Context, d string) (bool, error) {
	b.gateOnce.Do(func() {
		close(b.held)
		<-b.gate
	})
	return b.memBlobs.BlobHas(ctx, d)
}

func (b *batchBlobs) BlobPutMany(ctx context.Context, blobs map[string][]byte) error {
	if b.failBatch {
		return errors.New("disk full")
	}
	for d, data := range blobs {
		if sha256Hex(data) != d {
			return errors.New("digest does not match the data")
		}
	}
	b.memBlobs.mu.Lock()
	for d, data := range blobs {
		b.m[d] = append([]byte(nil), data...)
	}
	b.memBlobs.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches = append(b.batches, len(blobs))
	return nil
}

// queueBlobs puts blob 0 (already stored), waits until the putter is held
// at its BlobHas, puts blobs 1 to n-1 meanwhile, then lets it go and waits
// for it. Waiting for the hold makes the batches certain: blob 0 alone,
// then the n-1 others together (queued before the putter could look).
func queueBlobs(t *testing.T, b *batchBlobs, n int) (newBlobs int, err error) {
	t.Helper()
	b.held = make(chan struct{})
	known := []byte("blob 0")
	b.putRaw(t, known)
	p := newPutter(context.Background(), b, nil)
	for i := range n {
		data := []byte(fmt.Sprintf("blob %d", i))
		require.NoError(t, p.put(sha256Hex(data), data, fmt.Sprintf("content of %q", fmt.Sprintf("f%d", i)), true))
		if i == 0 {
			<-b.held
		}
	}
	close(b.gate)
	newBlobs, _, err = p.finish()
	return newBlobs, err
}

func TestPutterStoresQueuedBlobsInOneBatch(t *testing.T) {
	t.Parallel()
	b := &batchBlobs{memBlobs: newMemBlobs(), gate: make(chan struct{})}
	newBlobs, err := queueBlobs(t, b, 20)
	require.NoError(t, err)
	require.Equal(t, 19, newBlobs, "blob 0 was stored already")
	for i := range 20 {
		has, err := b.memBlobs.BlobHas(context.Background(), sha256Hex([]byte(fmt.Sprintf("blob %d", i))))
		require.NoError(t, err)
		require.True(t, has, "blob %d", i)
	}
	// Blob 0 was taken alone (and found stored); the others waited for it
	// and went together, in one transaction.
	require.Equal(t, []int{19}, b.batches)
	require.Equal(t, 1, b.puts, "no blob stored alone (the one put is putRaw's)")
}

func TestPutterBatchErrorFailsTheTake(t *testing.T) {
	t.Parallel()
	b := &batchBlobs{memBlobs: newMemBlobs(), gate: make(chan struct{}), failBatch: true}
	_, err := queueBlobs(t, b, 20)
	require.ErrorContains(t, err, "disk full")
	require.ErrorContains(t, err, `content of "f`, "the error names a blob")
}

// TestReadSmallFileThatGrew: a file stated under MinChunkSize that is
// larger when read (it grew meanwhile) is read again, chunked, and cut as
// any file of its size; a small one is one chunk, as the chunker cuts it.
func TestReadSmallFileThatGrew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for _, size := range []int{0, 1, 4 << 10, MinChunkSize - 1, MinChunkSize, 3 * MinChunkSize, 9 << 20} {
		data := randomBytes(uint64(size), size)
		writeFile(t, dir, "f", data, 0o644)
		read := func(statSize int64) (int64, string, []Chunk) {
			f, err := os.Open(filepath.Join(dir, "f"))
			require.NoError(t, err)
			defer f.Close()
			tk := &taker{ctx: ctx, b: newMemBlobs(), seen: make(map[string]bool)}
			defer func() {
				if tk.work != nil {
					chunkWorkPool.Put(tk.work)
				}
			}()
			n, sha, chunks, err := tk.read("f", f, statSize)
			require.NoError(t, err)
			return n, sha, chunks
		}
		wantN, wantSHA, wantChunks := func() (int64, string, []Chunk) {
			f, err := os.Open(filepath.Join(dir, "f"))
			require.NoError(t, err)
			defer f.Close()
			tk := &taker{ctx: ctx, b: newMemBlobs(), seen: make(map[string]bool)}
			n, sha, chunks, err := tk.readChunks("f", f)
			require.NoError(t, err)
			chunkWorkPool.Put(tk.work)
			return n, sha, chunks
		}()
		require.Equal(t, int64(size), wantN)
		require.Equal(t, sha256Hex(data), wantSHA)
		for _, statSize := range []int64{0, 10, int64(size)} {
			n, sha, chunks := read(statSize)
			require.Equal(t, wantN, n, "size %d stated %d", size, statSize)
			require.Equal(t, wantSHA, sha, "size %d stated %d", size, statSize)
			require.Equal(t, wantChunks, chunks, "size %d stated %d", size, statSize)
		}
	}
}
