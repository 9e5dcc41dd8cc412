package environment

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteLocksAreDroppedWhenFree: the lock of a workspace's file changes
// excludes its other writers, and is forgotten once nobody holds or waits
// for it — a server that ran many sessions keeps no lock for each.
func TestWriteLocksAreDroppedWhenFree(t *testing.T) {
	t.Parallel()
	b := &localBackend{}

	const writers = 8
	var (
		wg      sync.WaitGroup
		inside  int
		most    int
		counter sync.Mutex
	)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				unlock := b.lockWrites("wsp_a")
				counter.Lock()
				inside++
				most = max(most, inside)
				counter.Unlock()
				counter.Lock()
				inside--
				counter.Unlock()
				unlock()
			}
		}()
	}
	other := b.lockWrites("wsp_b")
	wg.Wait()
	require.Equal(t, 1, most, "two changes of one workspace at once")

	b.mu.Lock()
	require.Len(t, b.writing, 1, "only the lock still held is kept")
	require.Contains(t, b.writing, "wsp_b")
	b.mu.Unlock()

	other()
	b.mu.Lock()
	require.Empty(t, b.writing)
	b.mu.Unlock()
}
