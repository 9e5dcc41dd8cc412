package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// memLister is an in-memory store.SessionLister: the store's order
// (newest first: created_at, then id) and paging (the cursor is the last id
// of the previous page).
type memLister struct {
	rows []*store.SessionRow
	// repeat, when set, starts every page after the first with the
	// previous page's last row again (a list that repeats one).
	repeat bool
}

var walkStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// add creates session id under parent, created at ms milliseconds.
func (l *memLister) add(id, parent string, ms int) {
	l.rows = append(l.rows, &store.SessionRow{ID: id, ParentID: parent, CreatedAt: walkStart.Add(time.Duration(ms) * time.Millisecond)})
}

func (l *memLister) SessionList(_ context.Context, p *store.SessionListParams) ([]*store.SessionRow, error) {
	rows := slices.Clone(l.rows)
	slices.SortFunc(rows, func(a, b *store.SessionRow) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	var out []*store.SessionRow
	started := p.Cursor == ""
	for _, r := range rows {
		if !started {
			started = r.ID == p.Cursor
			if !(started && l.repeat) {
				continue
			}
		}
		if r.ParentID == p.ParentID && len(out) < p.Limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func walkIDs(ms []store.TreeMember) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestWalkTreeOrder(t *testing.T) {
	t.Parallel()
	l := &memLister{}
	// Created out of id order, two at the same instant (then by id).
	l.add("b", "root", 1)
	l.add("a", "root", 2)
	l.add("ba", "b", 3)
	l.add("c", "root", 2)
	l.add("aa", "a", 4)
	l.add("bb", "b", 0)
	l.add("other", "", 0)
	members, err := store.WalkTree(t.Context(), l, "root", 0)
	require.NoError(t, err)
	require.Equal(t, []store.TreeMember{
		{ID: "b", ParentID: "root"}, {ID: "a", ParentID: "root"}, {ID: "c", ParentID: "root"},
		{ID: "bb", ParentID: "b"}, {ID: "ba", ParentID: "b"}, {ID: "aa", ParentID: "a"},
	}, members, "breadth first, each after its parent, children oldest first")

	leaf, err := store.WalkTree(t.Context(), l, "aa", 0)
	require.NoError(t, err)
	require.Empty(t, leaf)
}

func TestWalkTreeReadsEveryPage(t *testing.T) {
	t.Parallel()
	for _, repeat := range []bool{false, true} {
		l := &memLister{repeat: repeat}
		var want []string
		for i := range 1200 {
			id := fmt.Sprintf("s%04d", i)
			l.add(id, "root", i)
			want = append(want, id)
		}
		members, err := store.WalkTree(t.Context(), l, "root", 0)
		require.NoError(t, err)
		require.Equal(t, want, walkIDs(members), "repeat %v: every page, each session once, oldest first", repeat)
	}
}

func TestWalkTreeBound(t *testing.T) {
	t.Parallel()
	l := &memLister{}
	for i := range 4 {
		l.add(fmt.Sprintf("c%d", i), "root", i)
	}
	for i := range 5 {
		l.add(fmt.Sprintf("g%d", i), "c0", 10+i)
	}
	// 10 sessions with the root: a bound of 10 serves them all.
	members, err := store.WalkTree(t.Context(), l, "root", 10)
	require.NoError(t, err)
	require.Len(t, members, 9)

	// One fewer: refused, with the first limit-1 found, in walk order.
	members, err = store.WalkTree(t.Context(), l, "root", 9)
	require.ErrorIs(t, err, store.ErrTreeTooLarge)
	require.Equal(t, []string{"c0", "c1", "c2", "c3", "g0", "g1", "g2", "g3"}, walkIDs(members))

	// A fan-out past the room stops the read of the children early.
	kids, err := store.Children(t.Context(), l, "c0", 3)
	require.ErrorIs(t, err, store.ErrTreeTooLarge)
	require.Len(t, kids, 5, "what was read, oldest first")
	kids, err = store.Children(t.Context(), l, "c0", 5)
	require.NoError(t, err)
	require.Equal(t, []string{"g0", "g1", "g2", "g3", "g4"}, kids)
}
