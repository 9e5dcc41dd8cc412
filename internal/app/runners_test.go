package app_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestListRunners: the runners fresh in the store, by project then name;
// an operator sees its own project's (another project's filter is
// refused), an admin every project's or the one it names; a row not seen
// for longer than the stale bound by the store's clock (its node died) is
// not listed.
func TestListRunners(t *testing.T) {
	t.Parallel()
	// The store's clock, which alone says how old a row is.
	start := time.Now().UTC().Truncate(time.Microsecond)
	clock := apptest.NewClock(start.Add(-time.Hour))
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "longhaul.db"), &sqlite.Config{Now: clock.Now})
	require.NoError(t, err)
	require.NoError(t, st.Migrate(t.Context()))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	f := &fixture{t: t, ctx: app.WithCaller(t.Context(), app.LibraryCaller), st: st}
	f.app = apptest.New(t, st, apptest.EngineOn(t, st, nil), nil)

	connect := func(r *store.RunnerRow) {
		r.ConnID, r.KeyID, r.Node, r.Version = "rc_"+r.Project+r.Name, "key_"+r.Project, "node-a", "v1"
		require.NoError(t, f.st.RunnerConnect(f.ctx, r, time.Minute))
	}
	connect(&store.RunnerRow{Project: "alpha", Name: "gone", Capacity: 1})
	clock.Set(start.Add(-time.Minute))
	for _, r := range []*store.RunnerRow{
		{Project: "alpha", Name: "box2", Labels: []string{"gpu"}, Capacity: 4},
		{Project: "alpha", Name: "box1", Capacity: 1},
		{Project: "beta", Name: "box1", Capacity: 1},
	} {
		connect(r)
	}
	clock.Set(start.Add(-time.Second))
	require.NoError(t, f.st.RunnerTouch(f.ctx, "alpha", "box1", "rc_alphabox1"))
	clock.Set(start)
	require.NoError(t, f.st.RunnerTouch(f.ctx, "alpha", "box2", "rc_alphabox2"))
	require.NoError(t, f.st.RunnerTouch(f.ctx, "beta", "box1", "rc_betabox1"))
	now := start
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
		Node: "node-a", KeyID: "key_alpha", ConnectedAt: now.Add(-time.Minute), LastSeenAt: now, Sessions: []string{}}, all.Data[1])

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
