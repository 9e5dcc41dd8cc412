package environmenttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
)

// Blobs is the server's store of blobs in the suite (a real SQLite store),
// counting the blobs fetched by digest: how the suite sees that an
// environment fetches only the blobs its side lacks.
type Blobs struct {
	snapshot.Blobs
	// Store is the store itself, whose reads are not counted: the
	// server's own (the owners of blobs, the trees it checks).
	Store *sqlite.Store

	mu   sync.Mutex
	gets map[string]int
}

// NewBlobs returns the blobs of a new SQLite store in a temporary
// directory, closed at the end of the test.
func NewBlobs(tb testing.TB) *Blobs {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "longhaul.db"), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	require.NoError(tb, st.Migrate(context.Background()))
	return &Blobs{Blobs: st, Store: st, gets: make(map[string]int)}
}

// BlobGet implements snapshot.Blobs, counting the fetch.
func (b *Blobs) BlobGet(ctx context.Context, digest string) ([]byte, error) {
	data, err := b.Blobs.BlobGet(ctx, digest)
	if err == nil {
		b.mu.Lock()
		b.gets[digest]++
		b.mu.Unlock()
	}
	return data, err
}

// TotalGets returns how many blobs were fetched, all digests together.
func (b *Blobs) TotalGets() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.gets {
		n += c
	}
	return n
}

// Gets returns how many times the blob of digest was fetched.
func (b *Blobs) Gets(digest string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gets[digest]
}

// Digest is the content address of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
