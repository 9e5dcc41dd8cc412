package storeutil

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// closed reports whether ch is closed, draining what it buffered.
func closed(ch <-chan store.Notification) bool {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return true
			}
		default:
			return false
		}
	}
}

func TestHubPublishReachesSubscribers(t *testing.T) {
	h := NewHub(2)
	a, cancelA := h.Subscribe(t.Context())
	defer cancelA()
	b, cancelB := h.Subscribe(t.Context())
	defer cancelB()

	n := store.Notification{Kind: store.KindRunnable}
	h.Publish(n)
	require.Equal(t, n, <-a)
	require.Equal(t, n, <-b)
}

func TestHubPublishNeverBlocks(t *testing.T) {
	h := NewHub(1)
	ch, cancel := h.Subscribe(t.Context())
	defer cancel()
	// The buffer holds one; the rest are dropped rather than waited for.
	for range 5 {
		h.Publish(store.Notification{Kind: store.KindSecrets})
	}
	require.Len(t, ch, 1)
}

func TestHubCancelClosesOnce(t *testing.T) {
	h := NewHub(1)
	ch, cancel := h.Subscribe(t.Context())
	cancel()
	require.True(t, closed(ch))
	cancel() // a second cancel is a no-op, not a double close
	h.Publish(store.Notification{Kind: store.KindRunnable})
	h.Close() // the hub no longer holds the cancelled subscriber
}

func TestHubContextEndCloses(t *testing.T) {
	h := NewHub(1)
	ctx, cancelCtx := context.WithCancel(t.Context())
	ch, cancel := h.Subscribe(ctx)
	defer cancel()
	cancelCtx()
	// AfterFunc runs the removal on its own goroutine: wait for the close.
	_, ok := <-ch
	require.False(t, ok)
}

func TestHubSubscribeWithEndedContext(t *testing.T) {
	h := NewHub(1)
	ctx, cancelCtx := context.WithCancel(t.Context())
	cancelCtx()
	ch, cancel := h.Subscribe(ctx)
	defer cancel()
	_, ok := <-ch
	require.False(t, ok)
}

func TestHubClose(t *testing.T) {
	h := NewHub(1)
	ch, cancel := h.Subscribe(t.Context())
	h.Close()
	require.True(t, closed(ch))
	cancel() // after Close: nothing left to close

	later, cancelLater := h.Subscribe(t.Context())
	defer cancelLater()
	require.True(t, closed(later), "a subscription after Close gets a closed channel")
}
