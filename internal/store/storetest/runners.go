package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// testRunners: a connection's row is listed while it is fresh, a newer
// connection under the same name replaces it only with the same key or
// when the row is stale (the older one's touch and
// disconnect then find nothing of theirs), names are per project, and an
// invalid row is refused.
func testRunners(t *testing.T, h *harness) {
	list, err := h.s.RunnerList(h.ctx, "", at(0))
	require.NoError(t, err)
	require.Empty(t, list)

	gpu := &store.RunnerRow{
		Project: "default", Name: "box1", ConnID: "rc_1", KeyID: "key_1", Node: "node-a",
		Labels: []string{"gpu", "linux"}, Capacity: 4, Version: "v1.2.3",
		ConnectedAt: at(time.Second), SeenAt: at(time.Second),
	}
	require.NoError(t, h.s.RunnerConnect(h.ctx, gpu, at(0)))
	other := &store.RunnerRow{
		Project: "team-b", Name: "box1", ConnID: "rc_2", KeyID: "key_2", Node: "node-b",
		Capacity: 1, ConnectedAt: at(2 * time.Second), SeenAt: at(2 * time.Second),
	}
	require.NoError(t, h.s.RunnerConnect(h.ctx, other, at(0)))

	list, err = h.s.RunnerList(h.ctx, "", at(0))
	require.NoError(t, err)
	wantOther := *other
	wantOther.Labels = []string{}
	require.Equal(t, []*store.RunnerRow{gpu, &wantOther}, list)

	list, err = h.s.RunnerList(h.ctx, "team-b", at(0))
	require.NoError(t, err)
	require.Equal(t, []*store.RunnerRow{&wantOther}, list, "a project's runners only")

	// Liveness: a touch moves seen_at forward (never back); a row not
	// seen since the bound is not listed.
	require.NoError(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_1", at(10*time.Second)))
	require.NoError(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_1", at(5*time.Second)))
	list, err = h.s.RunnerList(h.ctx, "", at(3*time.Second))
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "box1", list[0].Name)
	require.Equal(t, at(10*time.Second), list[0].SeenAt)

	// Another key cannot take the name while its row is fresh: the row
	// is untouched.
	thief := *gpu
	thief.ConnID, thief.KeyID = "rc_x", "key_other"
	thief.ConnectedAt, thief.SeenAt = at(11*time.Second), at(11*time.Second)
	require.ErrorIs(t, h.s.RunnerConnect(h.ctx, &thief, at(time.Second)), store.ErrConflict,
		"a name held by another key")
	require.NoError(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_1", at(10*time.Second)), "the holder keeps its row")

	// A newer connection of the same key replaces the row.
	newer := *gpu
	newer.ConnID, newer.Node, newer.Labels = "rc_3", "node-b", []string{"cpu"}
	newer.ConnectedAt, newer.SeenAt = at(11*time.Second), at(11*time.Second)
	require.NoError(t, h.s.RunnerConnect(h.ctx, &newer, at(time.Second)))
	require.ErrorIs(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_1", at(12*time.Second)), store.ErrNotFound,
		"the replaced connection learns it")
	require.NoError(t, h.s.RunnerDisconnect(h.ctx, "default", "box1", "rc_1"), "removing a replaced connection is no error")
	list, err = h.s.RunnerList(h.ctx, "default", at(0))
	require.NoError(t, err)
	require.Equal(t, []*store.RunnerRow{&newer}, list, "and removes nothing")

	// Another key takes a stale row (its holder's liveness expired).
	taker := thief
	taker.ConnID = "rc_4"
	taker.ConnectedAt, taker.SeenAt = at(30*time.Second), at(30*time.Second)
	require.NoError(t, h.s.RunnerConnect(h.ctx, &taker, at(20*time.Second)))
	require.ErrorIs(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_3", at(31*time.Second)), store.ErrNotFound)
	list, err = h.s.RunnerList(h.ctx, "default", at(0))
	require.NoError(t, err)
	wantTaker := taker
	wantTaker.Labels = []string{"gpu", "linux"}
	require.Equal(t, []*store.RunnerRow{&wantTaker}, list)

	require.NoError(t, h.s.RunnerDisconnect(h.ctx, "default", "box1", "rc_4"))
	list, err = h.s.RunnerList(h.ctx, "default", at(0))
	require.NoError(t, err)
	require.Empty(t, list)
	require.ErrorIs(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_4", at(33*time.Second)), store.ErrNotFound)

	for _, bad := range []*store.RunnerRow{
		nil,
		{Project: "default", ConnID: "c", KeyID: "k", Node: "n", ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", KeyID: "k", Node: "n", ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", ConnID: "c", KeyID: "k", Node: "n", Labels: []string{""}, ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", ConnID: "c", KeyID: "k", Node: "n", Labels: make([]string, 33), ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", ConnID: "c", KeyID: "k", Node: "n", Capacity: -1, ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", ConnID: "c", KeyID: "k", Node: "n"},
	} {
		require.Error(t, h.s.RunnerConnect(h.ctx, bad, at(0)))
	}
	require.Error(t, h.s.RunnerTouch(h.ctx, "default", "", "c", at(0)))
	require.Error(t, h.s.RunnerDisconnect(h.ctx, "default", "x", ""))
}
