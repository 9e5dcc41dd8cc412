package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestBlobCacheIsBounded: past its bound the cache drops the blobs used
// least recently, down to three quarters of it; a blob whose bytes are
// not its digest is dropped when read; and without a connection a missing
// blob is an error, not a wait.
func TestBlobCacheIsBounded(t *testing.T) {
	dir := t.TempDir()
	c, err := newBlobCache(dir, 1000, t.Logf)
	require.NoError(t, err)
	var digests []string
	for i := range 5 {
		data := []byte(fmt.Sprintf("%0200d", i))
		digests = append(digests, digestOf(data))
		c.keep(digests[i], data)
	}
	for _, d := range digests {
		require.NotNil(t, c.cached(d), "1000 bytes fit in 1000")
	}
	// Distinct use times, oldest first (reading a blob marks it used, and
	// the file system's clock may be coarse).
	base := time.Now().Add(-time.Hour)
	for i, d := range digests {
		at := base.Add(time.Duration(i) * time.Minute)
		require.NoError(t, os.Chtimes(c.path(d), at, at))
	}
	more := []byte(fmt.Sprintf("%0200d", 5))
	c.keep(digestOf(more), more) // 1200 > 1000: down to 750
	require.Nil(t, c.cached(digests[0]), "the least recently used goes first")
	require.Nil(t, c.cached(digests[1]))
	require.NotNil(t, c.cached(digestOf(more)))
	require.LessOrEqual(t, c.scanSize(), int64(750))

	c.keep(digestOf([]byte("big")), make([]byte, 300)) // over a quarter of the bound: not kept
	require.NoError(t, os.WriteFile(c.path(digests[3]), []byte("tampered"), 0o600))
	require.Nil(t, c.cached(digests[3]), "bytes that are not their digest are not used")
	_, err = os.Stat(c.path(digests[3]))
	require.ErrorIs(t, err, os.ErrNotExist)

	_, err = c.BlobGet(context.Background(), digestOf([]byte("never cached")))
	require.ErrorIs(t, err, errNoConnection)
}
