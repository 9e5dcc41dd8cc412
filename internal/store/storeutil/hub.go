package storeutil

import (
	"context"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// Hub fans notifications out to this process's subscribers: SQLite's
// stand-in for LISTEN/NOTIFY, and PostgreSQL's fan-out of its own commits and
// of what its listener hears from other nodes. Publishing never blocks: a
// subscriber whose buffer is full misses the notification, which is allowed
// because notifications are hints and subscribers re-read the store.
type Hub struct {
	buffer int

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	ch   chan store.Notification
	stop func() bool // stops the context watcher
}

// NewHub returns a Hub whose subscribers each buffer up to buffer
// notifications.
func NewHub(buffer int) *Hub {
	return &Hub{buffer: buffer, subs: make(map[*subscriber]struct{})}
}

// Subscribe registers a subscriber until cancel is called, ctx ends or the
// hub closes; each of them closes the channel, once.
func (h *Hub) Subscribe(ctx context.Context) (<-chan store.Notification, func()) {
	sub := &subscriber{ch: make(chan store.Notification, h.buffer)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		close(sub.ch)
		return sub.ch, func() {}
	}
	cancel := func() { h.remove(sub) }
	h.subs[sub] = struct{}{}
	// AfterFunc starts no goroutine until ctx ends, and stop releases it, so
	// a cancelled subscription leaves nothing behind. If ctx has already
	// ended, cancel runs as soon as the lock is released.
	sub.stop = context.AfterFunc(ctx, cancel)
	h.mu.Unlock()

	return sub.ch, func() {
		sub.stop()
		cancel()
	}
}

func (h *Hub) remove(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[sub]; !ok {
		return
	}
	delete(h.subs, sub)
	close(sub.ch)
}

// Publish offers n to every subscriber without waiting.
func (h *Hub) Publish(n store.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		select {
		case sub.ch <- n:
		default:
		}
	}
}

// Close closes every subscriber's channel; later subscriptions get a closed
// channel.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		delete(h.subs, sub)
		close(sub.ch)
		if sub.stop != nil {
			sub.stop()
		}
	}
}
