package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestListRunners: the runners fresh in the store, by project then name;
// an operator sees its own project's (another project's filter is
// refused), an admin every project's or the one it names; a row not seen
// for longer than the stale bound (its node died) is not listed.
func TestListRunners(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, r := range []*store.RunnerRow{
		{Project: "alpha", Name: "box2", Labels: []string{"gpu"}, Capacity: 4, SeenAt: now},
		{Project: "alpha", Name: "box1", Capacity: 1, SeenAt: now.Add(-time.Second)},
		{Project: "beta", Name: "box1", Capacity: 1, SeenAt: now},
		{Project: "alpha", Name: "gone", Capacity: 1, SeenAt: now.Add(-time.Hour)},
	} {
		r.ConnID, r.KeyID, r.Node, r.Version, r.ConnectedAt = "rc_"+r.Project+r.Name, "key_"+r.Project, "node-a", "v1", now.Add(-time.Minute)
		require.NoError(t, f.st.RunnerConnect(f.ctx, r, time.Time{}))
	}
	names := func(l *lt.List[lt.Runner]) []string {
		var out []string
		for _, r := range l.Data {
			out = append(out, r.Project+"/"+r.Name)
		}
		return out
	}

	all, err := f.app.ListRunners(f.ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"alpha/box1", "alpha/box2", "beta/box1"}, names(all))
	require.Equal(t, lt.Runner{Name: "box2", Project: "alpha", Labels: []string{"gpu"}, Capacity: 4, Version: "v1",
		Node: "node-a", KeyID: "key_alpha", ConnectedAt: now.Add(-time.Minute), LastSeenAt: now}, all.Data[1])

	beta, err := f.app.ListRunners(f.ctx, "beta")
	require.NoError(t, err)
	require.Equal(t, []string{"beta/box1"}, names(beta))

	op := app.WithCaller(t.Context(), app.Caller{KeyID: "key_op", Name: "ops", Role: lt.RoleOperator, Project: "alpha"})
	own, err := f.app.ListRunners(op, "")
	require.NoError(t, err)
	require.Equal(t, []string{"alpha/box1", "alpha/box2"}, names(own))
	_, err = f.app.ListRunners(op, "beta")
	require.Error(t, err, "an operator lists its own project only")
}
