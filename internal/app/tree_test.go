package app_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func ids(sessions []lt.Session) []string {
	out := make([]string, len(sessions))
	for i, s := range sessions {
		out[i] = s.ID
	}
	return out
}

// TestSessionTreeOrder: a session spawns two sub-agents, the first of
// which spawns one of its own. The tree nests each under its parent,
// children oldest first, each read whole.
func TestSessionTreeOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	root := f.create(spawnerSpec(spawnerSpec(leafSpec), leafSpec), "delegate")
	f.waitIdle(root.ID)
	kids := f.spawnedChildren(root.ID)
	require.Len(t, kids, 2)
	grandkids := f.spawnedChildren(kids[0])
	require.Len(t, grandkids, 1)
	f.waitIdle(kids[0])
	f.waitIdle(kids[1])

	tree, err := f.app.GetSessionTree(f.ctx, root.ID)
	require.NoError(t, err)
	require.Equal(t, root.ID, tree.ID)
	require.Equal(t, kids, ids(tree.Subagents), "children oldest first")
	require.Equal(t, grandkids, ids(tree.Subagents[0].Subagents), "a grandchild under its parent")
	require.Empty(t, tree.Subagents[1].Subagents)
	require.Equal(t, root.ID, *tree.Subagents[0].ParentID)
	require.Equal(t, lt.SessionIdle, tree.Subagents[0].Subagents[0].Status, "each session read whole")

	// A sub-tree from any of its sessions; a leaf is a tree of one.
	sub, err := f.app.GetSessionTree(f.ctx, kids[0])
	require.NoError(t, err)
	require.Equal(t, grandkids, ids(sub.Subagents))
	leaf, err := f.app.GetSessionTree(f.ctx, kids[1])
	require.NoError(t, err)
	require.Empty(t, leaf.Subagents)

	// The tree's actions: none pending here, an empty list (not null).
	actions, err := f.app.ListTreeActions(f.ctx, root.ID, lt.ActionPending)
	require.NoError(t, err)
	require.NotNil(t, actions.Data)
	require.Empty(t, actions.Data)

	_, err = f.app.GetSessionTree(f.ctx, "ses_missing")
	requireAPIError(t, err, http.StatusNotFound, "")
	_, err = f.app.ListTreeActions(f.ctx, "ses_missing", "")
	requireAPIError(t, err, http.StatusNotFound, "")
}

// TestSessionTreeIsBounded: a tree of MaxTreeSessions sessions is served;
// one more is refused, never cut, by every tree use case.
func TestSessionTreeIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	root := f.create(leafSpec, "the root")
	f.waitIdle(root.ID)
	// Sub-agents written straight to the store: rows with a parent are all
	// a walk reads (9 children, the rest under them).
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	add := func(i int, parent string) string {
		id := fmt.Sprintf("ses_sub_%04d", i)
		row := store.SessionRow{ID: id, AgentName: "worker", AgentVersion: 1, ParentID: parent, Status: string(lt.SessionIdle),
			Spec: []byte(`{}`), State: []byte(`{}`), CreatedAt: at.Add(time.Duration(i) * time.Millisecond), UpdatedAt: at}
		_, err := f.st.SessionCreate(f.ctx, &store.SessionCreateParams{Session: row})
		require.NoError(t, err)
		return id
	}
	var parents []string
	for i := range 9 {
		parents = append(parents, add(i, root.ID))
	}
	for i := 9; i < app.MaxTreeSessions-1; i++ {
		add(i, parents[i%len(parents)])
	}
	members, err := f.eng.SessionTree(f.ctx, root.ID)
	require.NoError(t, err)
	require.Len(t, members, app.MaxTreeSessions-1, "the most served, the root aside")
	require.Equal(t, parents, memberIDs(members[:9]), "breadth first, children oldest first")

	add(app.MaxTreeSessions, parents[0])
	_, err = f.app.GetSessionTree(f.ctx, root.ID)
	e := requireAPIError(t, err, http.StatusBadRequest, "include")
	require.Contains(t, e.Message, "more than 1000 sessions")
	_, err = f.app.ListTreeActions(f.ctx, root.ID, "")
	requireAPIError(t, err, http.StatusBadRequest, "include")
	var errs []error
	for ev, err := range f.app.StreamTreeEvents(f.ctx, root.ID, "") {
		require.Empty(t, ev.Cursor)
		errs = append(errs, err)
	}
	require.Len(t, errs, 1, "the error is the stream's only value")
	requireAPIError(t, errs[0], http.StatusBadRequest, "include")
}

func memberIDs(ms []store.TreeMember) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// requireAPIError asserts err is an *apierror.Error with status and field.
func requireAPIError(t *testing.T, err error, status int, field string) *apierror.Error {
	t.Helper()
	var e *apierror.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, status, e.Status, "%v", err)
	require.Equal(t, field, e.Field, "%v", err)
	return e
}
