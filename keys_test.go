package longhaul_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRuntimeMe: the library calls as the admin "library" of every
// project, and may call every method.
func TestRuntimeMe(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	me, err := rt.Me(t.Context())
	require.NoError(t, err)
	require.Equal(t, "library", me.Name)
	require.Equal(t, lt.RoleAdmin, me.Role)
	require.Empty(t, me.Project, "every project")
	require.Empty(t, me.KeyID)
	require.Subset(t, me.Permissions, []string{"CreateKey", "DecideAction", "Me", "PutSecret"})
}
