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

// Trajectory rules apply across a tree of sub-agents: a policy that counts
// earlier effects (count(effects, ...)) sees those of every session of the
// tree, not only its own. The runner follows the other sessions' journals
// incrementally, one cursor per session, while it holds its lease.

// maxTreeSessions bounds the sessions a tree-wide rule looks at.
const maxTreeSessions = 1000

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
			r.others[id] = th
		}
		for {
			evs, err := r.e.store.EventList(ctx, id, th.after, 1000)
			if err != nil {
				return nil, fmt.Errorf("read the journal of session %s of the tree: %w", id, err)
			}
			for _, ev := range evs {
				w, err := r.e.resolveBlob(ctx, wireEvent(ev))
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

// treeSessions lists every session of st's tree: its root and all the
// root's descendants.
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
	return e.descendants(ctx, root, true)
}

// descendants lists id's descendants, breadth first (id itself first when
// self), at most maxTreeSessions.
func (e *Engine) descendants(ctx context.Context, id string, self bool) ([]string, error) {
	var out []string
	if self {
		out = append(out, id)
	}
	queue := []string{id}
	for len(queue) > 0 && len(out) < maxTreeSessions {
		parent := queue[0]
		queue = queue[1:]
		cursor := ""
		for {
			rows, err := e.store.SessionList(ctx, &store.SessionListParams{ParentID: parent, Cursor: cursor, Limit: 200})
			if err != nil {
				return nil, fmt.Errorf("list the sub-agents of %s: %w", parent, err)
			}
			for _, row := range rows {
				out = append(out, row.ID)
				queue = append(queue, row.ID)
			}
			if len(rows) < 200 {
				break
			}
			cursor = rows[len(rows)-1].ID
		}
	}
	if len(out) > maxTreeSessions {
		out = out[:maxTreeSessions]
	}
	return out, nil
}
