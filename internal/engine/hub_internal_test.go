package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHubKeepsTheHighestPendingSeq: notices may arrive out of order (on
// PostgreSQL), and a watcher takes what it receives as the highest seq
// announced, so a lower seq heard later must not replace a higher one.
func TestHubKeepsTheHighestPendingSeq(t *testing.T) {
	h := newHub(nil)
	grew, stop := h.watch("s1")
	defer stop()
	h.publish("s1", 5)
	h.publish("s1", 3)
	require.Equal(t, int64(5), <-grew)
	h.publish("s1", 3)
	h.publish("s1", 7)
	require.Equal(t, int64(7), <-grew)
	select {
	case seq := <-grew:
		t.Fatalf("one pending seq at most, got another: %d", seq)
	default:
	}
}
