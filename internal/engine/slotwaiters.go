package engine

import (
	"sync"
	"time"
)

// slotScanTrust is how long a scan that found no pending
// environment_connection action in a project spares the next ones
// (RunnerFreed). Actions waiting for a slot on a runner are raised on the
// node that holds the runner's connection (the router refuses with
// ErrFull only there), which marks them at once; one another node raised
// (no runner connected, as far as it could tell) is announced by the
// store (KindActionRaised), which ends the trust of every project here at
// once. This bound is only for such an announcement lost (notifications
// are hints): the action is then found at a close at most this long after.
const slotScanTrust = 30 * time.Second

// slotWaiters tells, per project, whether a pending
// environment_connection action may exist, so that a runner's closed
// environment (RunnerFreed, at every close with room left) reads the store
// only when there may be one to wake. The common case, nothing waiting,
// costs no store read.
type slotWaiters struct {
	mu sync.Mutex
	// gen counts the actions this node raised, per project, each counted
	// once it is durable.
	gen map[string]uint64
	// elsewhere counts the actions other nodes raised (announced by the
	// store, of any project: the announcement names only the session).
	// A scan's generation is its project's gen plus elsewhere, so that
	// either moving voids what a scan under way finds.
	elsewhere uint64
	// clear is the last scan of a project that found none: at gen, at
	// the time. It stands while gen has not moved, for slotScanTrust.
	clear map[string]slotScan
}

type slotScan struct {
	gen uint64
	at  time.Time
}

// raised records that an environment_connection action of project is
// durable (called after the flush, so a scan that missed it cannot clear
// the project afterwards).
func (w *slotWaiters) raised(project string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen == nil {
		w.gen = map[string]uint64{}
	}
	w.gen[project]++
	delete(w.clear, project)
}

// raisedElsewhere records that a pending action was raised, by this node
// or another, in some project: no earlier "none" is trusted any more.
func (w *slotWaiters) raisedElsewhere() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.elsewhere++
	clear(w.clear)
}

// mayWait reports whether project may have a pending action, and the
// generation a scan started now is to report with scanned.
func (w *slotWaiters) mayWait(project string, now time.Time) (bool, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.gen[project] + w.elsewhere
	c, ok := w.clear[project]
	return !ok || c.gen != g || now.Sub(c.at) >= slotScanTrust || now.Before(c.at), g
}

// scanned records that a scan started at generation g found no pending
// action: unless one was raised meanwhile, later scans are spared.
func (w *slotWaiters) scanned(project string, g uint64, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen[project]+w.elsewhere != g {
		return
	}
	if w.clear == nil {
		w.clear = map[string]slotScan{}
	}
	w.clear[project] = slotScan{gen: g, at: at}
}
