package engine

import (
	"context"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// hub fans the store's notifications out: journal growth to the watchers of
// each session (SSE streams), runnable sessions to the scheduler. One store
// subscription serves every watcher.
type hub struct {
	st store.Store
	mu sync.Mutex
	// watchers are each session's watchers.
	watchers map[string]map[*watcher]struct{}
	runnable chan struct{}
	// onSecrets is called when the vault's secrets change (redaction must
	// know every value).
	onSecrets func()
	// onActionRaised, when set, is called when a pending action was
	// recorded, here or on another node (it must not block).
	onActionRaised func()
	// onEvents, when set, is called with the session whose journal grew
	// and its last seq (it must not block).
	onEvents func(sessionID string, seq int64)
	cancel   func()
	wg       sync.WaitGroup
}

func newHub(st store.Store) *hub {
	return &hub{st: st, watchers: make(map[string]map[*watcher]struct{}), runnable: make(chan struct{}, 1)}
}

func (h *hub) start(ctx context.Context) {
	ch, cancel := h.st.Subscribe(ctx)
	h.cancel = cancel
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for n := range ch {
			switch n.Kind {
			case store.KindEvents:
				h.publish(n.SessionID, SessionGrowth{Seq: n.Seq, Status: lt.SessionStatus(n.Status)})
				if h.onEvents != nil {
					h.onEvents(n.SessionID, n.Seq)
				}
			case store.KindRunnable:
				select {
				case h.runnable <- struct{}{}:
				default:
				}
			case store.KindSecrets:
				if h.onSecrets != nil {
					h.onSecrets()
				}
			case store.KindActionRaised:
				if h.onActionRaised != nil {
					h.onActionRaised()
				}
			}
		}
	}()
}

func (h *hub) stop() {
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
}

func (h *hub) publish(sessionID string, g SessionGrowth) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers[sessionID] {
		w.announce(g)
	}
}

// SessionGrowth is a notice that a session's journal grew.
type SessionGrowth struct {
	// Seq is the session's last seq after the commit.
	Seq int64
	// Status is the session's status after the commit, or empty when the
	// notice did not say (one from another node, or announced again after
	// a lost connection): read the session for it.
	Status lt.SessionStatus
}

// watcher is one watch of a session: seqs or growths receives its notices
// (one of the two is set), and wake, if not nil, is called after each.
type watcher struct {
	seqs    chan int64
	growths chan SessionGrowth
	wake    func()
}

// announce hands g to the watcher without blocking. Only the newest notice
// is kept pending, merged with the one it replaces (PostgreSQL's notices
// may come out of order): a watcher re-reads from its own position, and its
// callers take what they receive as the highest announced. The hub calls
// it under its lock, so the slot stays empty once drained.
func (w *watcher) announce(g SessionGrowth) {
	if w.seqs != nil {
		keepNewest(w.seqs, g.Seq, func(old, seq int64) int64 { return max(old, seq) })
	} else {
		keepNewest(w.growths, g, newerGrowth)
	}
	if w.wake != nil {
		w.wake()
	}
}

// keepNewest puts v in ch, a channel of one slot, merged with what was
// pending there.
func keepNewest[T any](ch chan T, v T, merge func(old, v T) T) {
	select {
	case ch <- v:
		return
	default:
	}
	pending := v
	select {
	case old := <-ch:
		pending = merge(old, v)
	default:
	}
	select {
	case ch <- pending:
	default:
	}
}

// newerGrowth returns, of a pending notice a and a newer one b, the one
// that says the most: the higher seq's. Of one seq said twice (a commit
// heard here and announced again after the listener reconnected, or an
// append without events, which no caller makes today), b when both
// statuses are known (this process hears its own commits in order, and a
// seq another node's payload of version 2 says a status of is one commit,
// whose status it is); when one came without a status (from a node
// sending version 1, which may have committed after or before the other)
// and they differ, the status is not known and is left empty: a watcher
// that needs it reads the session.
func newerGrowth(a, b SessionGrowth) SessionGrowth {
	switch {
	case a.Seq > b.Seq:
		return a
	case b.Seq > a.Seq:
		return b
	case a.Status != b.Status && (a.Status == "" || b.Status == ""):
		return SessionGrowth{Seq: b.Seq}
	}
	return b
}

func (h *hub) watch(sessionID string) (<-chan int64, func()) {
	return h.watchWake(sessionID, nil)
}

// watchGrowth is watch with each notice's status.
func (h *hub) watchGrowth(sessionID string) (<-chan SessionGrowth, func()) {
	w := &watcher{growths: make(chan SessionGrowth, 1)}
	return w.growths, h.add(sessionID, w)
}

// watchWake is watch with wake, if not nil, called after each seq is put
// in the channel: by the hub's goroutine, under its lock, so it must not
// block nor call the hub.
func (h *hub) watchWake(sessionID string, wake func()) (<-chan int64, func()) {
	w := &watcher{seqs: make(chan int64, 1), wake: wake}
	return w.seqs, h.add(sessionID, w)
}

// add registers w and returns the function that removes it.
func (h *hub) add(sessionID string, w *watcher) func() {
	h.mu.Lock()
	if h.watchers[sessionID] == nil {
		h.watchers[sessionID] = make(map[*watcher]struct{})
	}
	h.watchers[sessionID][w] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.watchers[sessionID], w)
			if len(h.watchers[sessionID]) == 0 {
				delete(h.watchers, sessionID)
			}
			h.mu.Unlock()
		})
	}
}
