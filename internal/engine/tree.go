package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/policy"
	"github.com/longhaul-dev/longhaul/internal/store"
)

// MaxTreeSessions bounds the sessions of one tree that are read or followed
// together, the root included. The API refuses a larger tree rather than
// cut it (a client must not take a partial tree for the whole one); a
// tree-wide policy looks at this many.
const MaxTreeSessions = 1000

// Trajectory rules apply across a tree of sub-agents: a policy that counts
// earlier effects (count(effects, ...)) sees those of every session of the
// tree, not only its own. The runner follows the other sessions' journals
// incrementally, one cursor per session, while it holds its lease, each
// from its latest context snapshot that holds an effect history (resume.go)
// rather than from its first event.

// treeHistory is the effect history of one other session of the tree.
type treeHistory struct {
	h     *history
	after int64
}

// treeEffects returns the effects of the tree's other sessions (nil when
// the session is not part of a tree).
func (r *runner) treeEffects(ctx context.Context) ([]policy.Effect, error) {
	if r.st.Session.ParentID == nil && len(r.st.Children) == 0 {
		return nil, nil
	}
	ids, err := r.e.treeSessions(ctx, r.st)
	if err != nil {
		return nil, err
	}
	if r.others == nil {
		r.others = make(map[string]*treeHistory)
	}
	var out []policy.Effect
	for _, id := range ids {
		if id == r.st.Session.ID {
			continue
		}
		th := r.others[id]
		if th == nil {
			th = &treeHistory{h: newHistory()}
			h, at, err := r.e.snapshotHistory(ctx, id)
			if err != nil {
				return nil, err
			}
			if h != nil {
				th.h, th.after = h, at
			}
			r.others[id] = th
		}
		for {
			evs, err := r.e.store.EventList(ctx, id, th.after, 1000)
			if err != nil {
				return nil, fmt.Errorf("read the journal of session %s of the tree: %w", id, err)
			}
			for _, ev := range evs {
				w, err := r.e.resolveBlob(ctx, wireEvent(ev), true)
				if err != nil {
					return nil, err
				}
				th.h.observe(w)
				th.after = ev.Seq
			}
			if len(evs) < 1000 {
				break
			}
		}
		out = append(out, th.h.effects...)
	}
	return out, nil
}

// snapshotHistory returns the effect history that session id's latest
// context snapshot holds, and the seq it holds it at: nil when there is no
// such snapshot (the journal is read from its first event).
func (e *Engine) snapshotHistory(ctx context.Context, id string) (*history, int64, error) {
	row, st, err := e.loadState(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	snap, err := e.readContextSnapshot(ctx, id, row.LastSeq, st.ContextSnapshot)
	if err != nil || snap == nil {
		return nil, 0, err
	}
	h := e.snapshotHistoryOf(snap)
	if h == nil {
		return nil, 0, nil
	}
	return h, snap.Seq, nil
}

// treeSessions lists every session of st's tree: its root and all the
// root's descendants, at most MaxTreeSessions. A larger tree is cut rather
// than refused: a tree-wide rule then sees the effects of the sessions the
// walk reached first.
func (e *Engine) treeSessions(ctx context.Context, st *journal.State) ([]string, error) {
	root := st.Session.ID
	for parent := st.Session.ParentID; parent != nil; {
		row, err := e.store.SessionGet(ctx, *parent)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		var ps journal.State
		if err := json.Unmarshal(row.State, &ps); err != nil {
			return nil, fmt.Errorf("decode session %s: %w", row.ID, err)
		}
		root, parent = row.ID, ps.Session.ParentID
	}
	members, err := store.WalkTree(ctx, e.store, root, MaxTreeSessions)
	if err != nil && !errors.Is(err, store.ErrTreeTooLarge) {
		return nil, err
	}
	ids := make([]string, 0, len(members)+1)
	ids = append(ids, root)
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// SessionTree lists the sessions below root as WalkTree does, at most
// MaxTreeSessions with the root (past it: store.ErrTreeTooLarge, and no members).
func (e *Engine) SessionTree(ctx context.Context, root string) ([]store.TreeMember, error) {
	members, err := store.WalkTree(ctx, e.store, root, MaxTreeSessions)
	if err != nil {
		return nil, err
	}
	return members, nil
}

// SessionChildren lists the children of session id oldest first, as
// Children does (past room: store.ErrTreeTooLarge, and no ids).
func (e *Engine) SessionChildren(ctx context.Context, id string, room int) ([]string, error) {
	ids, err := store.Children(ctx, e.store, id, room)
	if err != nil {
		return nil, err
	}
	return ids, nil
}
