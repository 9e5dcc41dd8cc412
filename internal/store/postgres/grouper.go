package postgres

import (
	"context"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// grouper hands queued items to a few goroutines, each of which takes, once
// free, everything queued meanwhile (up to max) and handles it together:
// the committer's writes, the session reader's reads.
type grouper[T any] struct {
	queue chan T
	// mu orders adds before stop: an item added before stop is handled,
	// one added after is refused.
	mu      sync.RWMutex
	stopped bool
	wg      sync.WaitGroup
}

func newGrouper[T any](workers, max int, handle func(group []T)) *grouper[T] {
	g := &grouper[T]{queue: make(chan T, queuedWrites)}
	for range workers {
		g.wg.Go(func() {
			for first := range g.queue {
				group := []T{first}
				for len(group) < max && g.take(&group) {
				}
				handle(group)
			}
		})
	}
	return g
}

// take appends an item already queued to group; false if there is none.
func (g *grouper[T]) take(group *[]T) bool {
	select {
	case item, ok := <-g.queue:
		if ok {
			*group = append(*group, item)
		}
		return ok
	default:
		return false
	}
}

// add queues item; store.ErrClosed once stop has begun.
func (g *grouper[T]) add(ctx context.Context, item T) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.stopped {
		return store.ErrClosed
	}
	select {
	case g.queue <- item:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop handles the items already queued, then ends the goroutines.
func (g *grouper[T]) stop() {
	g.mu.Lock()
	if !g.stopped {
		g.stopped = true
		close(g.queue)
	}
	g.mu.Unlock()
	g.wg.Wait()
}
