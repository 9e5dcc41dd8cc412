package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// actionDoc is an action projection row whose document has the given type.
func actionDoc(id, status, typ string, created time.Time) store.DocWrite {
	return doc(store.DocAction, id, status, `{"id":"`+id+`","type":"`+typ+`","status":"`+status+`"}`, created)
}

// testActionListAll: the inbox across sessions, in creation order (ties
// broken by id), with each filter alone and together, paged by a cursor.
func testActionListAll(t *testing.T, h *harness) {
	h.createSession("ses_a")
	h.createSession("ses_b")
	h.createSession("ses_c")
	h.append("ses_a", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{
			actionDoc("act_a1", "pending", "approval", at(1*time.Second)),
			actionDoc("act_a2", "resolved", "approval", at(2*time.Second)),
			actionDoc("act_a3", "pending", "input", at(4*time.Second)),
			// Not actions: never listed.
			doc(store.DocTurn, "turn_a", "running", `{"type":"approval"}`, at(time.Second)),
			doc(store.DocEffect, "eff_a", "started", `{"type":"approval"}`, at(time.Second)),
		}
	})
	h.append("ses_b", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{
			// act_b1 and act_b2 share act_a3's time: the id breaks the tie.
			actionDoc("act_b2", "pending", "budget", at(4*time.Second)),
			actionDoc("act_b1", "pending", "approval", at(4*time.Second)),
			actionDoc("act_b3", "cancelled", "function_call", at(3*time.Second)),
		}
	})
	h.append("ses_c", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{actionDoc("act_c1", "pending", "approval", at(5*time.Second))}
	})

	list := h.actionIDs
	all := []string{"act_a1", "act_a2", "act_b3", "act_a3", "act_b1", "act_b2", "act_c1"}
	require.Equal(t, all, list(store.ActionListParams{}))
	rows, err := h.s.ActionListAll(h.ctx, nil)
	require.NoError(t, err, "nil params list everything")
	require.Equal(t, all, docIDs(rows))

	require.Equal(t, []string{"act_a1", "act_a3", "act_b1", "act_b2", "act_c1"}, list(store.ActionListParams{Status: "pending"}))
	require.Equal(t, []string{"act_a1", "act_a2", "act_b1", "act_c1"}, list(store.ActionListParams{Type: "approval"}))
	require.Equal(t, []string{"act_b3", "act_b1", "act_b2"}, list(store.ActionListParams{SessionID: "ses_b"}))
	require.Equal(t, []string{"act_a1", "act_b1", "act_c1"}, list(store.ActionListParams{Status: "pending", Type: "approval"}))
	require.Equal(t, []string{"act_a1"}, list(store.ActionListParams{Status: "pending", Type: "approval", SessionID: "ses_a"}))
	require.Empty(t, list(store.ActionListParams{Type: "in_doubt"}))
	require.Empty(t, list(store.ActionListParams{SessionID: "ses_unknown"}), "an unknown session lists nothing")

	// The rows are whole: session, status, document and time.
	rows, err = h.s.ActionListAll(h.ctx, &store.ActionListParams{SessionID: "ses_c"})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "ses_c", rows[0].SessionID)
	require.Equal(t, "pending", rows[0].Status)
	require.Equal(t, at(5*time.Second), rows[0].CreatedAt)
	requireJSON(t, `{"id":"act_c1","type":"approval","status":"pending"}`, rows[0].Doc)

	// Paging: each page starts after the previous page's last row, crossing
	// the tie at 4 s without skipping or repeating a row.
	var paged []string
	p := store.ActionListParams{Limit: 2}
	for {
		rows, err := h.s.ActionListAll(h.ctx, &p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(rows), 2)
		if len(rows) == 0 {
			break
		}
		paged = append(paged, docIDs(rows)...)
		last := rows[len(rows)-1]
		p.After = &store.DocCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	require.Equal(t, all, paged)

	// A cursor with a filter, and a cursor that is no row's position.
	require.Equal(t, []string{"act_b1", "act_b2"}, list(store.ActionListParams{
		Status: "pending", Limit: 2, After: &store.DocCursor{CreatedAt: at(4 * time.Second), ID: "act_a3"},
	}))
	require.Equal(t, []string{"act_b2", "act_c1"}, list(store.ActionListParams{
		Status: "pending", After: &store.DocCursor{CreatedAt: at(4 * time.Second), ID: "act_b1x"},
	}))
	require.Empty(t, list(store.ActionListParams{After: &store.DocCursor{CreatedAt: at(time.Hour), ID: ""}}))

	// A status change moves an action between filtered lists.
	h.append("ses_a", 2, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{actionDoc("act_a1", "resolved", "approval", at(time.Hour))}
	})
	require.Equal(t, []string{"act_a3", "act_b1", "act_b2", "act_c1"}, list(store.ActionListParams{Status: "pending"}))
	require.Equal(t, all, list(store.ActionListParams{}), "an update keeps the first created_at, so the order")

	// The default limit is 50.
	bulk := make([]store.DocWrite, 55)
	for i := range bulk {
		bulk[i] = actionDoc(fmt.Sprintf("act_bulk_%02d", i), "pending", "input", at(time.Hour+time.Duration(i)*time.Second))
	}
	h.append("ses_c", 2, 1, func(p *store.EventAppendParams) { p.Docs = bulk })
	require.Len(t, list(store.ActionListParams{Type: "input"}), 50)
	require.Len(t, list(store.ActionListParams{Type: "input", Limit: 100}), 56)

	_, err = h.s.ActionListAll(h.ctx, &store.ActionListParams{Limit: -1})
	require.Error(t, err, "a negative limit")
}

// testActionGetByID: an action is found by its id alone, in any session.
func testActionGetByID(t *testing.T, h *harness) {
	h.createSession("ses_x")
	h.createSession("ses_y")
	h.append("ses_y", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{
			actionDoc("act_y1", "pending", "approval", at(time.Second)),
			doc(store.DocTurn, "turn_y1", "running", `{}`, at(time.Second)),
		}
	})
	row, err := h.s.ActionGetByID(h.ctx, "act_y1")
	require.NoError(t, err)
	require.Equal(t, "act_y1", row.ID)
	require.Equal(t, "ses_y", row.SessionID)
	require.Equal(t, "pending", row.Status)
	require.Equal(t, at(time.Second), row.CreatedAt)
	requireJSON(t, `{"id":"act_y1","type":"approval","status":"pending"}`, row.Doc)

	h.append("ses_y", 2, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{actionDoc("act_y1", "resolved", "approval", at(time.Hour))}
	})
	row, err = h.s.ActionGetByID(h.ctx, "act_y1")
	require.NoError(t, err)
	require.Equal(t, "resolved", row.Status, "the latest write")

	_, err = h.s.ActionGetByID(h.ctx, "act_missing")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = h.s.ActionGetByID(h.ctx, "turn_y1")
	require.ErrorIs(t, err, store.ErrNotFound, "another kind's id is no action")
	_, err = h.s.ActionGetByID(h.ctx, "")
	require.Error(t, err)
}
