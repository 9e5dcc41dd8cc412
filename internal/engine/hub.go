package engine

import (
	"context"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// hub fans the store's notifications out: journal growth to the watchers of
// each session (SSE streams), runnable sessions to the scheduler. One store
// subscription serves every watcher.
type hub struct {
	st store.Store
	mu sync.Mutex
	// watchers are each session's watchers: their channel, and the
	// function called after each announce (nil for most: watchWake).
	watchers map[string]map[chan int64]func()
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
	return &hub{st: st, watchers: make(map[string]map[chan int64]func()), runnable: make(chan struct{}, 1)}
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
				h.publish(n.SessionID, n.Seq)
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

func (h *hub) publish(sessionID string, seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w, wake := range h.watchers[sessionID] {
		// Keep only the highest seq pending: a watcher re-reads from its
		// own position, and its callers take what they receive as the
		// highest announced (PostgreSQL's notices may come out of order).
		// Sends happen under h.mu, so the slot stays empty once drained.
		select {
		case w <- seq:
		default:
			pending := seq
			select {
			case old := <-w:
				pending = max(old, seq)
			default:
			}
			select {
			case w <- pending:
			default:
			}
		}
		if wake != nil {
			wake()
		}
	}
}

func (h *hub) watch(sessionID string) (<-chan int64, func()) {
	return h.watchWake(sessionID, nil)
}

// watchWake is watch with wake, if not nil, called after each seq is put
// in the channel: by the hub's goroutine, under its lock, so it must not
// block nor call the hub.
func (h *hub) watchWake(sessionID string, wake func()) (<-chan int64, func()) {
	w := make(chan int64, 1)
	h.mu.Lock()
	if h.watchers[sessionID] == nil {
		h.watchers[sessionID] = make(map[chan int64]func())
	}
	h.watchers[sessionID][w] = wake
	h.mu.Unlock()
	var once sync.Once
	return w, func() {
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
