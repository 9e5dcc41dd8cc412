package app_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestMe: every role learns who it is and exactly the methods
// app.Permissions gives it, sorted (so a client hides what a refused call
// would 403); an approver decides and cancels but does not run work, a
// reader only reads, a runner only asks who it is; the library is an admin
// of every project (no project, no key id). No caller is refused.
func TestMe(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	lib, err := f.app.Me(f.ctx)
	require.NoError(t, err)
	require.Equal(t, &lt.Identity{Name: "library", Role: lt.RoleAdmin, Permissions: lib.Permissions}, lib)
	require.Len(t, lib.Permissions, len(app.Permissions), "an admin may call every method")

	for _, role := range lt.Roles() {
		c := app.Caller{KeyID: "key_" + string(role), Name: "alice", Role: role, Project: "default"}
		if role == lt.RoleRunner {
			continue // below: a runner's key asks nothing
		}
		me, err := f.app.Me(app.WithCaller(t.Context(), c))
		require.NoError(t, err, role)
		require.Equal(t, c.KeyID, me.KeyID)
		require.Equal(t, "alice", me.Name)
		require.Equal(t, role, me.Role)
		require.Equal(t, "default", me.Project)
		require.True(t, slices.IsSorted(me.Permissions), role)
		require.Contains(t, me.Permissions, "Me", role)
		for method := range app.Permissions {
			require.Equal(t, app.Allowed(method, role), slices.Contains(me.Permissions, method), "%s may call %s", role, method)
		}
	}

	of := func(role lt.Role) []string {
		me, err := f.app.Me(app.WithCaller(t.Context(), app.Caller{Name: "x", Role: role}))
		require.NoError(t, err)
		return me.Permissions
	}
	approver := of(lt.RoleApprover)
	require.Subset(t, approver, []string{"DecideAction", "Review", "Cancel", "ListAllActions"})
	require.NotContains(t, approver, "Pause")
	require.NotContains(t, approver, "CreateSession")
	require.NotContains(t, of(lt.RoleOperator), "DecideAction", "who runs the work does not approve it")
	for _, m := range of(lt.RoleReader) {
		require.NotContains(t, []string{"DecideAction", "Cancel", "Steer", "Pause", "Resume", "UpdateBudget", "PutFileIfMatch", "CreateKey"}, m)
	}
	_, err = f.app.Me(app.WithCaller(t.Context(), app.Caller{Name: "x", Role: lt.RoleRunner}))
	require.Equal(t, http.StatusForbidden, apierror.From(err).Status, "a runner's key opens its connection, nothing else: %v", err)

	_, err = f.app.Me(t.Context())
	require.Equal(t, http.StatusForbidden, apierror.From(err).Status, "no caller: %v", err)
}
