package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// testRunners: a connection's row is listed while it is fresh, a newer
// connection under the same name replaces it only with the same key or
// when the row is stale (the older one's touch and disconnect then find
// nothing of theirs), names are per project, and an invalid row is
// refused. Every time is the store's clock: what a node's own clock says
// (an hour behind, a day ahead) changes nothing, so two nodes whose
// clocks disagree agree on which row is stale.
func testRunners(t *testing.T, h *harness) {
	list, err := h.s.RunnerList(h.ctx, "", 0)
	require.NoError(t, err)
	require.Empty(t, list)

	behind, ahead := at(0), time.Now().Add(24*time.Hour) // two nodes' skewed clocks
	gpu := &store.RunnerRow{
		Project: "default", Name: "box1", ConnID: "rc_1", KeyID: "key_1", Node: "node-a",
		Labels: []string{"gpu", "linux"}, Capacity: 4, Version: "v1.2.3",
		ConnectedAt: behind, SeenAt: behind,
	}
	require.NoError(t, h.s.RunnerConnect(h.ctx, gpu, time.Hour))
	require.NotEqual(t, behind, gpu.SeenAt, "the store's clock, not the node's")
	require.Equal(t, gpu.ConnectedAt, gpu.SeenAt)
	other := &store.RunnerRow{
		Project: "team-b", Name: "box1", ConnID: "rc_2", KeyID: "key_2", Node: "node-b",
		Capacity: 1, ConnectedAt: ahead, SeenAt: ahead,
	}
	require.NoError(t, h.s.RunnerConnect(h.ctx, other, time.Hour))
	require.True(t, other.SeenAt.Before(ahead), "the store's clock, not the node's")
	require.False(t, other.SeenAt.Before(gpu.SeenAt))

	list, err = h.s.RunnerList(h.ctx, "", time.Hour)
	require.NoError(t, err)
	wantOther := *other
	wantOther.Labels = []string{}
	require.Equal(t, []*store.RunnerRow{gpu, &wantOther}, list, "a row a node whose clock is behind recorded is fresh")

	list, err = h.s.RunnerList(h.ctx, "team-b", time.Hour)
	require.NoError(t, err)
	require.Equal(t, []*store.RunnerRow{&wantOther}, list, "a project's runners only")

	// Liveness: a touch moves seen_at forward, never back.
	require.NoError(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_1"))
	list, err = h.s.RunnerList(h.ctx, "default", time.Hour)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.False(t, list[0].SeenAt.Before(gpu.SeenAt))
	require.Equal(t, gpu.ConnectedAt, list[0].ConnectedAt)

	// Another key cannot take the name while its row is fresh by the
	// store's clock, however far ahead the taker's node's clock is: the
	// row is untouched.
	thief := *gpu
	thief.ConnID, thief.KeyID = "rc_x", "key_other"
	thief.ConnectedAt, thief.SeenAt = ahead, ahead
	require.ErrorIs(t, h.s.RunnerConnect(h.ctx, &thief, time.Hour), store.ErrConflict,
		"a name held by another key")
	require.NoError(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_1"), "the holder keeps its row")

	// A newer connection of the same key replaces the row.
	newer := *gpu
	newer.ConnID, newer.Node, newer.Labels = "rc_3", "node-b", []string{"cpu"}
	require.NoError(t, h.s.RunnerConnect(h.ctx, &newer, time.Hour))
	require.ErrorIs(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_1"), store.ErrNotFound,
		"the replaced connection learns it")
	require.NoError(t, h.s.RunnerDisconnect(h.ctx, "default", "box1", "rc_1"), "removing a replaced connection is no error")
	list, err = h.s.RunnerList(h.ctx, "default", time.Hour)
	require.NoError(t, err)
	require.Equal(t, []*store.RunnerRow{&newer}, list, "and removes nothing")

	// A row not seen within the bound (by the store's clock, which moves
	// on by itself) is not listed, unless the bound is 0 (every row).
	require.Eventually(t, func() bool {
		l, err := h.s.RunnerList(h.ctx, "default", time.Microsecond)
		require.NoError(t, err)
		return len(l) == 0
	}, 10*time.Second, time.Millisecond, "a stale row is not listed")
	list, err = h.s.RunnerList(h.ctx, "default", 0)
	require.NoError(t, err)
	require.Equal(t, []*store.RunnerRow{&newer}, list, "0 lists every row")

	// Another key takes a stale row (its holder's liveness expired).
	taker := thief
	taker.ConnID = "rc_4"
	require.Eventually(t, func() bool {
		err := h.s.RunnerConnect(h.ctx, &taker, time.Microsecond)
		if err != nil {
			require.ErrorIs(t, err, store.ErrConflict)
		}
		return err == nil
	}, 10*time.Second, time.Millisecond)
	require.ErrorIs(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_3"), store.ErrNotFound, "the holder learns it at its next touch")
	list, err = h.s.RunnerList(h.ctx, "default", time.Hour)
	require.NoError(t, err)
	wantTaker := taker
	wantTaker.Labels = []string{"gpu", "linux"}
	require.Equal(t, []*store.RunnerRow{&wantTaker}, list, "and its touch did not take the row back")

	require.NoError(t, h.s.RunnerDisconnect(h.ctx, "default", "box1", "rc_4"))
	list, err = h.s.RunnerList(h.ctx, "default", 0)
	require.NoError(t, err)
	require.Empty(t, list)
	require.ErrorIs(t, h.s.RunnerTouch(h.ctx, "default", "box1", "rc_4"), store.ErrNotFound)

	for _, bad := range []*store.RunnerRow{
		nil,
		{Project: "default", ConnID: "c", KeyID: "k", Node: "n", ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", KeyID: "k", Node: "n", ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", ConnID: "c", KeyID: "k", Node: "n", Labels: []string{""}, ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", ConnID: "c", KeyID: "k", Node: "n", Labels: make([]string, 33), ConnectedAt: at(0), SeenAt: at(0)},
		{Project: "default", Name: "x", ConnID: "c", KeyID: "k", Node: "n", Capacity: -1, ConnectedAt: at(0), SeenAt: at(0)},
	} {
		require.Error(t, h.s.RunnerConnect(h.ctx, bad, time.Hour))
	}
	valid := &store.RunnerRow{Project: "default", Name: "x", ConnID: "c", KeyID: "k", Node: "n"}
	require.ErrorContains(t, h.s.RunnerConnect(h.ctx, valid, -time.Second), "stale_after")
	_, err = h.s.RunnerList(h.ctx, "", -time.Second)
	require.ErrorContains(t, err, "stale_after")
	require.Error(t, h.s.RunnerTouch(h.ctx, "default", "", "c"))
	require.Error(t, h.s.RunnerDisconnect(h.ctx, "default", "x", ""))
}

// testRunnerSessions: a connection records the sessions open on it, listed
// with its row; another connection's write is refused, and a newer
// connection of the name starts with none.
func testRunnerSessions(t *testing.T, h *harness) {
	row := &store.RunnerRow{Project: "default", Name: "box7", ConnID: "rc_7", KeyID: "key_7", Node: "node-a", Capacity: 2}
	require.NoError(t, h.s.RunnerConnect(h.ctx, row, time.Hour))
	require.Equal(t, []string{}, row.Sessions)
	listed := func() []string {
		t.Helper()
		return listedRunner(t, h, "box7").Sessions
	}
	require.Equal(t, []string{}, listed())
	require.NoError(t, h.s.RunnerSessions(h.ctx, "default", "box7", "rc_7", []string{"ses_a", "ses_b"}))
	require.Equal(t, []string{"ses_a", "ses_b"}, listed())
	require.ErrorIs(t, h.s.RunnerSessions(h.ctx, "default", "box7", "rc_other", []string{"ses_x"}), store.ErrNotFound, "not the holder")
	require.ErrorContains(t, h.s.RunnerSessions(h.ctx, "default", "box7", "rc_7", []string{""}), "sessions[0]")
	require.Equal(t, []string{"ses_a", "ses_b"}, listed())
	require.NoError(t, h.s.RunnerSessions(h.ctx, "default", "box7", "rc_7", nil))
	require.Equal(t, []string{}, listed())

	require.NoError(t, h.s.RunnerSessions(h.ctx, "default", "box7", "rc_7", []string{"ses_a"}))
	newer := &store.RunnerRow{Project: "default", Name: "box7", ConnID: "rc_8", KeyID: "key_7", Node: "node-b", Capacity: 2}
	require.NoError(t, h.s.RunnerConnect(h.ctx, newer, time.Hour))
	require.Equal(t, []string{}, listed(), "a newer connection starts with none")
}

// testRunnerProtocol: the protocol a runner speaks is recorded with its
// connection and listed; a newer connection under the name records its
// own; a negative one is refused, naming the field, and changes nothing.
func testRunnerProtocol(t *testing.T, h *harness) {
	protocol := func() int {
		t.Helper()
		return listedRunner(t, h, "box9").Protocol
	}
	row := &store.RunnerRow{Project: "default", Name: "box9", ConnID: "rc_9", KeyID: "key_9", Node: "node-a", Capacity: 2, Version: "v2", Protocol: 3}
	require.NoError(t, h.s.RunnerConnect(h.ctx, row, time.Hour))
	require.Equal(t, 3, protocol())

	bad := *row
	bad.ConnID, bad.Protocol = "rc_bad", -1
	require.ErrorContains(t, h.s.RunnerConnect(h.ctx, &bad, time.Hour), "protocol")
	require.Equal(t, 3, protocol(), "a refused row changes nothing")

	newer := *row
	newer.ConnID, newer.Protocol = "rc_10", 2
	require.NoError(t, h.s.RunnerConnect(h.ctx, &newer, time.Hour))
	require.Equal(t, 2, protocol(), "the newer connection's protocol")
}

// listedRunner returns the default project's runner name as listed (the
// test fails if it is not).
func listedRunner(t *testing.T, h *harness, name string) *store.RunnerRow {
	t.Helper()
	l, err := h.s.RunnerList(h.ctx, "default", time.Hour)
	require.NoError(t, err)
	for _, r := range l {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("%s is not listed", name)
	return nil
}
