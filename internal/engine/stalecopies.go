package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// Copies of a stopped environment left on other nodes (issue 20, idle
// stop across nodes).
//
// With several nodes on one store, a session's workspace has a copy on
// each node that ran it (this node's backend keeps its own). An idle stop
// frees the copy of the node that runs it; the others stay, stale, taking
// disk for as long as the session lives. So every node listens to the
// journals' growth: when a session whose workspace it holds a copy of,
// open nowhere on this node, has its environment stopped, the copy is
// removed. Notifications are hints (a node that was down or slow misses
// some), so the engine also looks at every copy it holds when it starts.
//
// A claim of this node recreating the environment is never undone: the
// backend checks, holding the lock its Open takes, that no environment has
// the copy open and then reads the journal again (copyIsStale), so a copy
// is removed only while the journal still says the environment is
// stopped, that is while no claim has recreated it anywhere.

// staleCopies queues the sessions whose copy on this node may have become
// stale, coalesced: a burst of appends to one session is checked once.
type staleCopies struct {
	mu sync.Mutex
	// pending holds the highest seq noticed of each queued session.
	pending map[string]int64
	// current holds the seq at which this node's runner of a session left
	// its journal with the environment not stopped (left), until the
	// next take.
	current map[string]int64
	wake    chan struct{}
}

func newStaleCopies() *staleCopies {
	return &staleCopies{pending: map[string]int64{}, current: map[string]int64{}, wake: make(chan struct{}, 1)}
}

// notice queues sessionID, whose journal grew to seq, without blocking.
func (c *staleCopies) notice(sessionID string, seq int64) {
	c.mu.Lock()
	c.pending[sessionID] = max(c.pending[sessionID], seq)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// left records that this node's runner of sessionID, holding its
// workspace's lock, left the journal at seq with the environment not
// stopped: the copy is no stopped environment's as of seq, which is what
// the look of a notice up to seq would read (copyIsStale). The runner's
// last append is noticed as it commits, but heard here a moment later,
// often once the runner let the lock go: each session run here was read
// for nothing as it ended. A later append is noticed with a higher seq and
// looked at.
func (c *staleCopies) left(sessionID string, seq int64) {
	c.mu.Lock()
	c.current[sessionID] = seq
	c.mu.Unlock()
}

// take returns the queued sessions whose look may find something, and
// forgets what was queued and left.
func (c *staleCopies) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.pending))
	for id, seq := range c.pending {
		// A notice without a seq says nothing of where it was.
		if left, ok := c.current[id]; ok && seq > 0 && seq <= left {
			continue
		}
		out = append(out, id)
	}
	clear(c.pending)
	clear(c.current)
	return out
}

// discardStaleCopies runs until ctx ends: first over every copy this node
// holds, then over the sessions whose journal grew.
func (e *Engine) discardStaleCopies(ctx context.Context) {
	d, ok := e.envs.(environment.Discarder)
	if !ok {
		return
	}
	for _, id := range e.heldCopies() {
		e.discardIfStale(ctx, d, id)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.copies.wake:
		}
		for _, id := range e.copies.take() {
			if ctx.Err() != nil {
				return
			}
			e.discardIfStale(ctx, d, id)
		}
	}
}

// leftCopy tells the stale copies' looks that the runner, still holding
// the workspace's lock, leaves the journal with the environment not
// stopped, when all it did is durable (staleCopies.left).
func (r *runner) leftCopy() {
	if r.b.empty() && r.durableSeq == r.st.Session.LastEventSeq && !r.st.EnvironmentStopped {
		r.e.copies.left(r.lease.SessionID, r.durableSeq)
	}
}

// heldCopies lists the workspaces this node holds a copy of.
func (e *Engine) heldCopies() []string {
	entries, err := os.ReadDir(e.spaces.Root())
	if err != nil {
		e.log.Warn("list this node's workspace copies", "err", err)
		return nil
	}
	var ids []string
	for _, en := range entries {
		if en.IsDir() && workspace.ValidateSessionID(en.Name()) == nil {
			ids = append(ids, en.Name())
		}
	}
	return ids
}

// discardIfStale removes this node's copy of workspace id when the
// session's environment is stopped and no environment here has it open.
func (e *Engine) discardIfStale(ctx context.Context, d environment.Discarder, id string) {
	// A person's read or change of the copy (files.go) uses it with no
	// environment open, under the workspace's lock, and this node's runner
	// of the session holds it shared: while either does, the copy stays,
	// and nothing is read (a running session's every append is heard
	// here). A change journals workspace.changed before it is applied, so
	// its own notice would otherwise remove the copy under it, and the
	// snapshot list recorded after could name a copy that is gone.
	// Skipped rather than waited for: such a copy is current (it holds the
	// stop's snapshot and the change), and looked at again at the next
	// notice of the session or the next start.
	unlock, ok := e.wsLocks.tryExclusive(id)
	if !ok {
		return
	}
	defer unlock()
	removed, err := d.DiscardCopy(ctx, id, func(ctx context.Context) (bool, error) { return e.copyIsStale(ctx, id) })
	switch {
	case err != nil && ctx.Err() == nil:
		e.log.Warn("discard this node's stale copy of a stopped environment's workspace", "session", id, "err", err)
	case removed:
		e.log.Info("discarded this node's copy of a workspace whose environment was stopped", "session", id)
	}
}

// copyIsStale reports whether a copy of workspace id is no environment's:
// the journal of its session (a root: a sub-agent works in its root's)
// says its environment is stopped, the workspace being in the stop's
// snapshot (or lost, as the stop journaled). A session that is not known
// keeps its copy: deleting what the journal cannot account for is not
// this check's call.
func (e *Engine) copyIsStale(ctx context.Context, id string) (bool, error) {
	row, err := e.store.SessionGet(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return stoppedCopy(row, id)
}

// stoppedCopy reports whether the state of row says the environment of
// workspace id is stopped: loadState's answer, from the three fields it
// needs rather than the whole state decoded (every append of a session
// whose environment is closed here asks).
func stoppedCopy(row *store.SessionRow, id string) (bool, error) {
	var st struct {
		Session struct {
			ID           string `json:"id"`
			LastEventSeq int64  `json:"last_event_seq"`
		} `json:"session"`
		Workspace          string `json:"workspace"`
		EnvironmentStopped bool   `json:"environment_stopped"`
	}
	if err := json.Unmarshal(row.State, &st); err != nil {
		return false, fmt.Errorf("decode state of session %s: %w", row.ID, err)
	}
	if st.Session.LastEventSeq != row.LastSeq {
		return false, fmt.Errorf("session %s: state at seq %d but journal at %d", row.ID, st.Session.LastEventSeq, row.LastSeq)
	}
	ws := st.Workspace // journal.State.WorkspaceID
	if ws == "" {
		ws = st.Session.ID
	}
	return st.EnvironmentStopped && ws == id, nil
}
