package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The one walk of a session tree: the API's trees (include=subagents), its
// tree streams, the engine's tree-wide policies and export all list a tree
// with WalkTree, so they agree on its order and its bound. It lives with the
// storage contract because it needs nothing else.

// ErrTreeTooLarge: a session tree has more sessions than the walk was
// allowed.
var ErrTreeTooLarge = errors.New("the session tree has too many sessions")

// TreeMember is a session below the root of a tree, with its parent.
type TreeMember struct {
	ID, ParentID string
}

// SessionLister lists sessions by parent, newest first (Store is
// one).
type SessionLister interface {
	SessionList(ctx context.Context, p *SessionListParams) ([]*SessionRow, error)
}

// treePage is how many children one SessionList call of the walk reads.
const treePage = 500

// WalkTree lists every session below root, breadth first: each after its
// parent, the children of one parent oldest first (by creation time, then
// id). limit bounds the tree, root included (0: no bound); past it
// WalkTree returns ErrTreeTooLarge together with the first limit-1
// sessions it found, for a caller that may work on part of the tree. A
// session listed twice (a cycle, which parent links cannot form, or a page
// that repeats one) is taken once.
func WalkTree(ctx context.Context, l SessionLister, root string, limit int) ([]TreeMember, error) {
	var out []TreeMember
	seen := map[string]bool{root: true}
	for i := -1; i < len(out); i++ {
		parent := root
		if i >= 0 {
			parent = out[i].ID
		}
		room := -1
		if limit > 0 {
			room = limit - 1 - len(out)
		}
		kids, err := Children(ctx, l, parent, room)
		if err != nil && !errors.Is(err, ErrTreeTooLarge) {
			return nil, err
		}
		for _, c := range kids {
			if seen[c] {
				continue
			}
			if limit > 0 && len(out)+1 >= limit {
				return out, ErrTreeTooLarge
			}
			seen[c] = true
			out = append(out, TreeMember{ID: c, ParentID: parent})
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Children returns the ids of the sessions whose parent is id, oldest
// first, reading every page. Once it has read more than room of them
// (room < 0: no bound) it stops, so a huge fan-out is not read to its end,
// and returns those it read with ErrTreeTooLarge.
func Children(ctx context.Context, l SessionLister, id string, room int) ([]string, error) {
	p := SessionListParams{ParentID: id, Limit: treePage}
	var kids []*SessionRow
	var tooMany bool
	for {
		page, err := l.SessionList(ctx, &p)
		if err != nil {
			return nil, fmt.Errorf("list the sub-agents of %s: %w", id, err)
		}
		kids = append(kids, page...)
		if room >= 0 && len(kids) > room {
			tooMany = true
			break
		}
		if len(page) < treePage {
			break
		}
		p.Cursor = page[len(page)-1].ID
	}
	slices.SortStableFunc(kids, func(a, b *SessionRow) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	ids := make([]string, len(kids))
	for i, k := range kids {
		ids[i] = k.ID
	}
	if tooMany {
		return ids, ErrTreeTooLarge
	}
	return ids, nil
}
