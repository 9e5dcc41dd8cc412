package app_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestProxyUserCheck: a user a trusted proxy signs in gets the default
// project unless an admin (every project), and calls as "sso:" + name;
// each mistake is a 400 naming its field.
func TestProxyUserCheck(t *testing.T) {
	t.Parallel()
	u, err := app.ProxyUser{Name: "alice@example.com", Role: lt.RoleApprover}.Check()
	require.NoError(t, err)
	require.Equal(t, app.Caller{KeyID: "sso:alice@example.com", Name: "alice@example.com", Role: lt.RoleApprover, Project: lt.DefaultProject}, u.Caller())
	require.Equal(t, lt.Actor{KeyID: "sso:alice@example.com", Name: "alice@example.com", Role: lt.RoleApprover}, u.Caller().Actor())
	u, err = app.ProxyUser{Name: "root", Role: lt.RoleAdmin}.Check()
	require.NoError(t, err)
	require.Empty(t, u.Project, "an admin without a project has every project")
	u, err = app.ProxyUser{Name: "ops", Role: lt.RoleAdmin, Project: lt.DefaultProject}.Check()
	require.NoError(t, err)
	require.Equal(t, lt.DefaultProject, u.Project)
	u, err = app.ProxyUser{Name: "bob", Role: lt.RoleReader, Project: "support"}.Check()
	require.NoError(t, err)
	require.Equal(t, "support", u.Caller().Project, "a user of a project sees that project only")

	for _, tc := range []struct {
		user  app.ProxyUser
		field string
	}{
		{app.ProxyUser{Role: lt.RoleReader}, "name"},
		{app.ProxyUser{Name: " alice", Role: lt.RoleReader}, "name"},
		{app.ProxyUser{Name: "a,b", Role: lt.RoleReader}, "name"},
		{app.ProxyUser{Name: "a\nb", Role: lt.RoleReader}, "name"},
		{app.ProxyUser{Name: "Bootstrap", Role: lt.RoleReader}, "name"},
		{app.ProxyUser{Name: "alice", Role: "boss"}, "role"},
		{app.ProxyUser{Name: "alice"}, "role"},
		{app.ProxyUser{Name: "alice", Role: lt.RoleReader, Project: "Not OK"}, "project"},
	} {
		_, err := tc.user.Check()
		var ae *apierror.Error
		require.True(t, errors.As(err, &ae), "%+v: %v", tc.user, err)
		require.Equal(t, tc.field, ae.Field, "%+v: %v", tc.user, err)
	}
}
