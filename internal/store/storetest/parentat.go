package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// testSessionCreateParentAt: a sub-agent is created only while its
// parent's journal is as the spawning worker knows it (ParentAt): a parent
// whose journal moved since (a cancel answered meanwhile) or whose lease is
// another's refuses the creation, and nothing of the child is written.
func testSessionCreateParentAt(t *testing.T, h *harness) {
	h.createSession("ses_parent", runnable)
	leases := h.claim("node-a", at(time.Second), time.Hour, 1)
	require.Len(t, leases, 1)
	l := leases[0]
	child := func(id, parent string, pa *store.JournalAt) error {
		_, err := h.s.SessionCreate(h.ctx, &store.SessionCreateParams{
			Session: store.SessionRow{
				ID: id, ParentID: parent, AgentName: "agent", AgentVersion: 1, Status: "queued", Runnable: true,
				Spec: json.RawMessage(`{}`), State: json.RawMessage(`{}`), CreatedAt: t0, UpdatedAt: t0,
			},
			Events:   []store.NewEvent{{Type: "session.created", Time: t0, Data: json.RawMessage(`{}`)}},
			ParentAt: pa,
		})
		return err
	}
	requireNone := func(id string) {
		t.Helper()
		_, err := h.s.SessionGet(h.ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound, "%s was not created", id)
		_, err = h.s.EventList(h.ctx, id, 0, 0)
		require.ErrorIs(t, err, store.ErrNotFound, "no journal of %s", id)
	}

	require.NoError(t, child("ses_child_1", "ses_parent", &store.JournalAt{SessionID: "ses_parent", ExpectedSeq: 1, Fence: &l}))

	// A person's cancel lands in the parent's journal (an API write, with
	// no fence): the worker's view is one seq behind.
	h.append("ses_parent", 1, 1)
	err := child("ses_child_2", "ses_parent", &store.JournalAt{SessionID: "ses_parent", ExpectedSeq: 1, Fence: &l})
	require.ErrorIs(t, err, store.ErrConflict)
	require.ErrorIs(t, err, store.ErrParentMoved)
	requireNone("ses_child_2")

	// Another worker holds the parent now.
	other := l
	other.Epoch++
	err = child("ses_child_3", "ses_parent", &store.JournalAt{SessionID: "ses_parent", ExpectedSeq: 2, Fence: &other})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	requireNone("ses_child_3")

	err = child("ses_child_4", "ses_gone", &store.JournalAt{SessionID: "ses_gone", ExpectedSeq: 1})
	require.ErrorIs(t, err, store.ErrNotFound)
	requireNone("ses_child_4")

	err = child("ses_child_5", "ses_parent", &store.JournalAt{SessionID: "ses_other", ExpectedSeq: 2})
	require.Error(t, err)
	require.Contains(t, err.Error(), "parent_at.session_id")
	requireNone("ses_child_5")

	// As the worker knows it now: created; the same child again is a
	// conflict of its own, not a moved parent.
	require.NoError(t, child("ses_child_6", "ses_parent", &store.JournalAt{SessionID: "ses_parent", ExpectedSeq: 2, Fence: &l}))
	err = child("ses_child_6", "ses_parent", &store.JournalAt{SessionID: "ses_parent", ExpectedSeq: 2, Fence: &l})
	require.ErrorIs(t, err, store.ErrConflict)
	require.NotErrorIs(t, err, store.ErrParentMoved)
	got, err := h.s.SessionGet(h.ctx, "ses_child_6")
	require.NoError(t, err)
	require.Equal(t, "ses_parent", got.ParentID)
}
