package storeutil

import (
	"sync"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// Grouper handles queued items in groups: a driver's writes (SQLite's
// writer, PostgreSQL's committer), PostgreSQL's session reads. Up to
// workers groups are handled at once, each holding everything queued while
// the others were busy (up to max). The
// caller whose item finds a slot free handles the group itself, in its own
// goroutine, so a lone caller (one session at a time) costs no hand-off to
// another goroutine; if items queued up meanwhile, a goroutine takes its
// slot over and handles them while the caller returns.
type Grouper[T any] struct {
	workers, max int
	handle       func(group []T)

	mu      sync.Mutex
	pending []T
	active  int // slots taken
	stopped bool
	wg      sync.WaitGroup // one per slot taken
}

// NewGrouper returns a Grouper that handles at most workers groups at once,
// each of at most max items, with handle.
func NewGrouper[T any](workers, max int, handle func(group []T)) *Grouper[T] {
	return &Grouper[T]{workers: workers, max: max, handle: handle}
}

// Workers is how many groups may be handled at once.
func (g *Grouper[T]) Workers() int { return g.workers }

// Queued is how many items wait for a group.
func (g *Grouper[T]) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// Add queues item and, if a slot is free, handles the next group (which
// holds item, unless another slot's group took it first); it returns once
// that is done. store.ErrClosed once Stop has begun.
func (g *Grouper[T]) Add(item T) error {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return store.ErrClosed
	}
	g.pending = append(g.pending, item)
	lead := g.active < g.workers
	if lead {
		g.active++
		g.wg.Add(1)
	}
	g.mu.Unlock()
	if lead && g.next() {
		go g.drain()
	}
	return nil
}

// next handles the next group, if any, and reports whether the slot is
// still taken (more items are queued); if not, it gives the slot back.
func (g *Grouper[T]) next() bool {
	g.mu.Lock()
	n := min(len(g.pending), g.max)
	group := g.pending[:n:n]
	g.pending = g.pending[n:]
	if len(g.pending) == 0 {
		g.pending = nil // let the handled items go
	}
	g.mu.Unlock()
	if n > 0 {
		g.handle(group)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) > 0 {
		return true
	}
	g.active--
	g.wg.Done()
	return false
}

// drain handles groups until nothing is queued.
func (g *Grouper[T]) drain() {
	for g.next() {
	}
}

// Stop waits for the items already queued to be handled; later adds are
// refused.
func (g *Grouper[T]) Stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.wg.Wait()
}
