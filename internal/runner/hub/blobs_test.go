package hub

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// TestUploadGrowsWithItsParts: a first part announcing a blob of
// link.MaxBlobBytes holds the memory of its bytes, not of the size the
// runner announced.
func TestUploadGrowsWithItsParts(t *testing.T) {
	h := &Hub{cfg: Config{MaxUploadBytes: DefaultMaxUploadBytes}}
	r := &Runner{hub: h}
	_, end := AllowTake(r, 0)
	defer end()
	digest := "0000000000000000000000000000000000000000000000000000000000000000"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	data, err := h.part(r, &link.BlobPutParams{Digest: digest, Size: link.MaxBlobBytes, Data: make([]byte, 1024)})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Nil(t, data)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(link.MaxBlobBytes/4))
	require.Equal(t, int64(1024), h.uploading.Load())
	end()
	require.Zero(t, h.uploading.Load(), "the take's end gives the bytes back")
}
