package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

// treeHarness holds the leased sessions of one tree for the tree budget
// tests: each session's lease is what its reservations live under.
type treeHarness struct {
	*harness
	root   string
	leases map[string]store.Lease
	seqs   map[string]int64
}

// newTree creates the ledger of a tree and a leased session for each id.
func newTree(t *testing.T, h *harness, root string, limits store.TreeAmounts, ids ...string) *treeHarness {
	t.Helper()
	th := &treeHarness{harness: h, root: root, leases: map[string]store.Lease{}, seqs: map[string]int64{}}
	for _, id := range ids {
		h.createSession(id, runnable)
		th.seqs[id] = 1
	}
	for _, l := range h.claim("node-a", at(time.Second), time.Hour, len(ids)) {
		th.leases[l.SessionID] = store.Lease{SessionID: l.SessionID, Owner: l.Owner, Epoch: l.Epoch, ExpiresAt: l.ExpiresAt}
	}
	require.Len(t, th.leases, len(ids))
	require.NoError(t, h.s.TreeBudgetPut(h.ctx, &store.TreeBudgetPutParams{RootID: root, Limits: limits, Now: at(time.Second)}))
	return th
}

func (th *treeHarness) reserve(session, id string, kind store.TreeCallKind) *store.TreeReserveResult {
	th.t.Helper()
	res, err := th.s.TreeReserve(th.ctx, &store.TreeReserveParams{
		RootID: th.root, ID: id, Lease: th.leases[session], Kind: kind, Now: at(2 * time.Second),
	})
	require.NoError(th.t, err, "reserve %s", id)
	return res
}

// settle appends an event to session that settles the reservations release
// with used, under the session's lease.
func (th *treeHarness) settle(session string, used store.TreeAmounts, release ...string) {
	th.t.Helper()
	l := th.leases[session]
	th.append(session, th.seqs[session], 1, func(p *store.EventAppendParams) {
		p.Fence = &l
		p.Runnable = true
		p.TreeSettle = &store.TreeSettle{RootID: th.root, Release: release, Used: used}
	})
	th.seqs[session]++
}

func (th *treeHarness) ledger() *store.TreeBudgetRow {
	th.t.Helper()
	l, err := th.s.TreeBudgetGet(th.ctx, th.root)
	require.NoError(th.t, err)
	return l
}

// testTreeBudgetPut: a ledger is created with the root's usage, its limits
// are replaced by a later put and its spent is raised, never lowered.
func testTreeBudgetPut(t *testing.T, h *harness) {
	_, err := h.s.TreeBudgetGet(h.ctx, "ses_none")
	require.ErrorIs(t, err, store.ErrNotFound)
	h.createSession("ses_x", runnable)
	l := h.claim("node-a", at(time.Second), time.Hour, 1)[0]
	_, err = h.s.TreeReserve(h.ctx, &store.TreeReserveParams{RootID: "ses_none", ID: "res_1", Lease: l, Kind: store.TreeCallModel, Now: at(time.Second)})
	require.ErrorIs(t, err, store.ErrNotFound, "a tree without a ledger")

	put := func(limits, spent store.TreeAmounts) {
		t.Helper()
		require.NoError(t, h.s.TreeBudgetPut(h.ctx, &store.TreeBudgetPutParams{RootID: "ses_root", Limits: limits, Spent: spent, Now: at(time.Second)}))
	}
	put(store.TreeAmounts{CostUSD: 1, Tokens: 1000, ModelCalls: 10, ToolCalls: 20}, store.TreeAmounts{CostUSD: 0.25, Tokens: 100, ModelCalls: 2, ToolCalls: 1})
	got, err := h.s.TreeBudgetGet(h.ctx, "ses_root")
	require.NoError(t, err)
	require.Equal(t, &store.TreeBudgetRow{
		RootID: "ses_root", Limits: store.TreeAmounts{CostUSD: 1, Tokens: 1000, ModelCalls: 10, ToolCalls: 20},
		Spent: store.TreeAmounts{CostUSD: 0.25, Tokens: 100, ModelCalls: 2, ToolCalls: 1}, UpdatedAt: at(time.Second),
	}, got)

	put(store.TreeAmounts{CostUSD: 2}, store.TreeAmounts{CostUSD: 0.1, Tokens: 500})
	got, err = h.s.TreeBudgetGet(h.ctx, "ses_root")
	require.NoError(t, err)
	require.Equal(t, store.TreeAmounts{CostUSD: 2}, got.Limits, "the limits are replaced")
	require.Equal(t, store.TreeAmounts{CostUSD: 0.25, Tokens: 500, ModelCalls: 2, ToolCalls: 1}, got.Spent, "spent is raised, never lowered")

	err = h.s.TreeBudgetPut(h.ctx, &store.TreeBudgetPutParams{RootID: "ses_root", Limits: store.TreeAmounts{ModelCalls: -1}, Now: at(time.Second)})
	require.ErrorContains(t, err, "limits.model_calls")
}

// testTreeLimitsOfTheLatestJournal: the ledger keeps the limits of the
// latest seq of the root's journal it was given, whichever write commits
// last: a PATCH's sync read before another, or the root's call made on a
// journal read before a change, leaves the newer limits; the same seq
// replaces them.
func testTreeLimitsOfTheLatestJournal(t *testing.T, h *harness) {
	th := newTree(t, h, "ses_root", store.TreeAmounts{CostUSD: 5}, "ses_root")
	limits := func() store.TreeAmounts {
		t.Helper()
		got, err := h.s.TreeBudgetGet(h.ctx, "ses_root")
		require.NoError(t, err)
		return got.Limits
	}
	put := func(cost float64, seq int64) {
		t.Helper()
		require.NoError(t, h.s.TreeBudgetPut(h.ctx, &store.TreeBudgetPutParams{
			RootID: "ses_root", Limits: store.TreeAmounts{CostUSD: cost}, LimitsSeq: seq, Now: at(time.Second),
		}))
	}
	reserve := func(cost float64, seq int64) {
		t.Helper()
		res, err := h.s.TreeReserve(h.ctx, &store.TreeReserveParams{
			RootID: "ses_root", ID: "res_root", Lease: th.leases["ses_root"], Kind: store.TreeCallTool,
			Limits: &store.TreeAmounts{CostUSD: cost}, LimitsSeq: seq, Now: at(2 * time.Second),
		})
		require.NoError(t, err)
		require.Equal(t, store.TreeGranted, res.Outcome)
	}
	put(2, 5)
	require.Equal(t, 2.0, limits().CostUSD)
	put(8, 3)
	require.Equal(t, 2.0, limits().CostUSD, "limits read at an earlier seq, written later, change nothing")
	put(1.5, 5)
	require.Equal(t, 1.5, limits().CostUSD, "the same seq replaces them")
	put(1, 9)
	reserve(5, 7)
	require.Equal(t, 1.0, limits().CostUSD, "the root's call on a journal read before the change leaves it")
	reserve(0.5, 9)
	require.Equal(t, 0.5, limits().CostUSD)
	reserve(3, 12)
	require.Equal(t, 3.0, limits().CostUSD, "a later journal's")
	put(0.25, 11)
	require.Equal(t, 3.0, limits().CostUSD)

	err := h.s.TreeBudgetPut(h.ctx, &store.TreeBudgetPutParams{RootID: "ses_root", LimitsSeq: -1, Now: at(time.Second)})
	require.ErrorContains(t, err, "limits_seq")
	_, err = h.s.TreeReserve(h.ctx, &store.TreeReserveParams{
		RootID: "ses_root", ID: "res_root", Lease: th.leases["ses_root"], Kind: store.TreeCallTool,
		Limits: &store.TreeAmounts{}, LimitsSeq: -1, Now: at(2 * time.Second),
	})
	require.ErrorContains(t, err, "limits_seq")
	require.Equal(t, 3.0, limits().CostUSD)
}

// testTreeReserveCost reproduces six parallel children of a root with one
// dollar, whose calls cost 0.3 each: with the ledger, the tree spends at
// most the limit plus one call.
func testTreeReserveCost(t *testing.T, h *harness) {
	kids := []string{"ses_k1", "ses_k2", "ses_k3", "ses_k4", "ses_k5", "ses_k6"}
	th := newTree(t, h, "ses_root", store.TreeAmounts{CostUSD: 1}, kids...)
	call := store.TreeAmounts{CostUSD: 0.3, Tokens: 300, ModelCalls: 1}

	// No call settled yet: the cost of the next one is unknown, so the
	// first goes alone and the others wait.
	first := th.reserve("ses_k1", "res_k1_1", store.TreeCallModel)
	require.Equal(t, store.TreeGranted, first.Outcome)
	require.True(t, first.Exclusive)
	require.Equal(t, "cost_usd", first.Limit)
	for _, k := range kids[1:] {
		res := th.reserve(k, "res_"+k+"_1", store.TreeCallModel)
		require.Equal(t, store.TreeBusy, res.Outcome, k)
	}
	l := th.ledger()
	require.Equal(t, int64(1), l.Reserved.ModelCalls)
	require.True(t, l.Exclusive)

	th.settle("ses_k1", call, "res_k1_1")
	l = th.ledger()
	require.Equal(t, call, l.Spent)
	require.Equal(t, store.TreeAmounts{CostUSD: 0.3, Tokens: 300}, l.MaxCall)
	require.Equal(t, int64(1), l.SettledCalls)
	require.Zero(t, l.Reserved)
	require.False(t, l.Exclusive)

	// 0.3 spent: two more calls of 0.3 fit (0.9), a third would cross.
	var granted []string
	for _, k := range kids {
		res := th.reserve(k, "res_"+k+"_2", store.TreeCallModel)
		if res.Outcome == store.TreeGranted {
			require.False(t, res.Exclusive, k)
			require.Equal(t, store.TreeAmounts{CostUSD: 0.3, Tokens: 300, ModelCalls: 1}, res.Reserved)
			granted = append(granted, k)
			continue
		}
		require.Equal(t, store.TreeBusy, res.Outcome, k)
		require.Equal(t, "cost_usd", res.Limit)
	}
	require.Equal(t, []string{"ses_k1", "ses_k2"}, granted)
	// A call whose caller cannot vouch for the estimate (its first) goes
	// alone: it waits while calls are in flight.
	res, err := th.s.TreeReserve(th.ctx, &store.TreeReserveParams{
		RootID: th.root, ID: "res_k6_first", Lease: th.leases["ses_k6"], Kind: store.TreeCallModel, Unknown: true, Now: at(2 * time.Second),
	})
	require.NoError(t, err)
	require.Equal(t, store.TreeBusy, res.Outcome)

	for _, k := range granted {
		th.settle(k, call, "res_"+k+"_2")
	}

	// 0.9 spent: the next call crosses, so it goes alone.
	res = th.reserve("ses_k3", "res_k3_3", store.TreeCallModel)
	require.Equal(t, store.TreeGranted, res.Outcome)
	require.True(t, res.Exclusive)
	require.Equal(t, store.TreeBusy, th.reserve("ses_k4", "res_k4_3", store.TreeCallModel).Outcome)
	// A tool call does not wait for a model call.
	require.Equal(t, store.TreeGranted, th.reserve("ses_k4", "res_k4_tool", store.TreeCallTool).Outcome)
	th.settle("ses_k3", call, "res_k3_3")

	for _, k := range kids {
		res := th.reserve(k, "res_"+k+"_4", store.TreeCallModel)
		require.Equal(t, store.TreeExceeded, res.Outcome, k)
		require.Equal(t, "cost_usd", res.Limit)
	}
	l = th.ledger()
	require.InDelta(t, 1.2, l.Spent.CostUSD, 1e-9)
	require.LessOrEqual(t, l.Spent.CostUSD, 1.0+0.3+1e-9, "at most the limit plus one call")
}

// testTreeReserveCounts: model and tool calls never cross their limits:
// a call that would waits for the calls in flight, and is refused once
// they spent the limit.
func testTreeReserveCounts(t *testing.T, h *harness) {
	th := newTree(t, h, "ses_root", store.TreeAmounts{ModelCalls: 2, ToolCalls: 2}, "ses_a", "ses_b", "ses_c")
	for _, kind := range []store.TreeCallKind{store.TreeCallModel, store.TreeCallTool} {
		// The first model call has no estimate: it goes alone only when
		// its cost is limited; here only counts are.
		require.Equal(t, store.TreeGranted, th.reserve("ses_a", "res_a_"+string(kind), kind).Outcome, kind)
		require.Equal(t, store.TreeGranted, th.reserve("ses_b", "res_b_"+string(kind), kind).Outcome, kind)
		busy := th.reserve("ses_c", "res_c_"+string(kind), kind)
		require.Equal(t, store.TreeBusy, busy.Outcome, kind)
	}
	th.settle("ses_a", store.TreeAmounts{ModelCalls: 1, ToolCalls: 1}, "res_a_model", "res_a_tool")
	// One of each is still in flight and one was spent: the third waits.
	require.Equal(t, store.TreeBusy, th.reserve("ses_c", "res_c_model", store.TreeCallModel).Outcome)
	th.settle("ses_b", store.TreeAmounts{ModelCalls: 1, ToolCalls: 1}, "res_b_model", "res_b_tool")
	res := th.reserve("ses_c", "res_c_model", store.TreeCallModel)
	require.Equal(t, store.TreeExceeded, res.Outcome)
	require.Equal(t, "model_calls", res.Limit)
	res = th.reserve("ses_c", "res_c_tool", store.TreeCallTool)
	require.Equal(t, store.TreeExceeded, res.Outcome)
	require.Equal(t, "tool_calls", res.Limit)
	require.Equal(t, store.TreeAmounts{ModelCalls: 2, ToolCalls: 2}, th.ledger().Spent)

	// Raising the root's limits with a reservation lets calls go on.
	raised := store.TreeAmounts{ModelCalls: 3, ToolCalls: 3}
	res, err := th.s.TreeReserve(th.ctx, &store.TreeReserveParams{
		RootID: th.root, ID: "res_c_model", Lease: th.leases["ses_c"], Kind: store.TreeCallModel, Limits: &raised, Now: at(3 * time.Second),
	})
	require.NoError(t, err)
	require.Equal(t, store.TreeGranted, res.Outcome)
	require.Equal(t, raised, th.ledger().Limits)
}

// testTreeReservationLease: a reservation lives as long as the lease it was
// made under. A worker that crashed mid-call (its session claimed again by
// another worker) or released its lease blocks the tree no longer.
func testTreeReservationLease(t *testing.T, h *harness) {
	th := newTree(t, h, "ses_root", store.TreeAmounts{CostUSD: 1}, "ses_a", "ses_b")
	require.True(t, th.reserve("ses_a", "res_a", store.TreeCallModel).Exclusive)
	require.Equal(t, store.TreeBusy, th.reserve("ses_b", "res_b", store.TreeCallModel).Outcome)

	// ses_a's worker dies; after its lease expires, another worker claims
	// the session with the next epoch.
	taken := h.claim("node-b", at(2*time.Hour), time.Hour, 10)
	require.Len(t, taken, 2)
	for _, l := range taken {
		th.leases[l.SessionID] = store.Lease{SessionID: l.SessionID, Owner: l.Owner, Epoch: l.Epoch, ExpiresAt: l.ExpiresAt}
	}
	l := th.ledger()
	require.Zero(t, l.Reserved, "the dead worker's reservation does not count")
	require.False(t, l.Exclusive)
	res := th.reserve("ses_b", "res_b", store.TreeCallModel)
	require.Equal(t, store.TreeGranted, res.Outcome)

	// A released lease ends its reservations too.
	require.NoError(t, h.s.LeaseRelease(h.ctx, th.leases["ses_b"]))
	require.Zero(t, th.ledger().Reserved)
	require.True(t, th.reserve("ses_a", "res_a_2", store.TreeCallModel).Exclusive)

	// Reserving the same id again replaces the reservation.
	require.True(t, th.reserve("ses_a", "res_a_2", store.TreeCallModel).Exclusive)
	require.Equal(t, int64(1), th.ledger().Reserved.ModelCalls)
}

// testTreeReserveReplacesTheSessionsEarlier: a session makes one call of
// a kind at a time, so its reservation of a kind replaces its earlier one
// of that kind under the same lease: a runner that started over (the same
// claim) and calls again as a new attempt is not kept waiting by the
// reservation its predecessor left, and neither is the rest of the tree.
func testTreeReserveReplacesTheSessionsEarlier(t *testing.T, h *harness) {
	th := newTree(t, h, "ses_root", store.TreeAmounts{CostUSD: 1, ToolCalls: 10}, "ses_a", "ses_b")
	require.True(t, th.reserve("ses_a", "res_a_1", store.TreeCallModel).Exclusive)
	require.Equal(t, store.TreeBusy, th.reserve("ses_b", "res_b", store.TreeCallModel).Outcome)

	// ses_a's runner starts over under the same lease; its next attempt
	// has another id.
	require.True(t, th.reserve("ses_a", "res_a_2", store.TreeCallModel).Exclusive, "not kept waiting by res_a_1")
	require.Equal(t, int64(1), th.ledger().Reserved.ModelCalls)
	// A reservation of the other kind leaves the model call's alone.
	require.Equal(t, store.TreeGranted, th.reserve("ses_a", "res_a_tool", store.TreeCallTool).Outcome)
	l := th.ledger()
	require.Equal(t, int64(1), l.Reserved.ModelCalls)
	require.Equal(t, int64(1), l.Reserved.ToolCalls)
	require.True(t, l.Exclusive)

	th.settle("ses_a", store.TreeAmounts{CostUSD: 0.1, ModelCalls: 1, ToolCalls: 1}, "res_a_2", "res_a_tool")
	require.Zero(t, th.ledger().Reserved)
	require.Equal(t, store.TreeGranted, th.reserve("ses_b", "res_b", store.TreeCallModel).Outcome)
}

// testTreeSettleAtomic: a settlement belongs to its append: an append
// refused (a moved seq, a lost lease) settles nothing.
func testTreeSettleAtomic(t *testing.T, h *harness) {
	th := newTree(t, h, "ses_root", store.TreeAmounts{CostUSD: 1}, "ses_a")
	th.reserve("ses_a", "res_a", store.TreeCallModel)
	l := th.leases["ses_a"]
	for _, expected := range []int64{0, 5} {
		p := appendParams("ses_a", expected, 1)
		p.Fence = &l
		p.TreeSettle = &store.TreeSettle{RootID: th.root, Release: []string{"res_a"}, Used: store.TreeAmounts{CostUSD: 0.5, ModelCalls: 1}}
		_, err := h.s.EventAppend(h.ctx, p)
		require.ErrorIs(t, err, store.ErrConflict)
	}
	got := th.ledger()
	require.Zero(t, got.Spent)
	require.Equal(t, int64(1), got.Reserved.ModelCalls, "the reservation is still held")

	// A settlement for a tree without a ledger leaves the append alone.
	th.append("ses_a", 1, 1, func(p *store.EventAppendParams) {
		p.Fence = &l
		p.TreeSettle = &store.TreeSettle{RootID: "ses_gone", Used: store.TreeAmounts{CostUSD: 0.5}}
	})
	th.seqs["ses_a"] = 2
	th.settle("ses_a", store.TreeAmounts{CostUSD: 0.5, Tokens: 10, ModelCalls: 1}, "res_a", "res_unknown")
	got = th.ledger()
	require.Equal(t, store.TreeAmounts{CostUSD: 0.5, Tokens: 10, ModelCalls: 1}, got.Spent)
	require.Zero(t, got.Reserved)

	p := appendParams("ses_a", 3, 1)
	p.TreeSettle = &store.TreeSettle{RootID: th.root, Used: store.TreeAmounts{Tokens: -1}}
	_, err := h.s.EventAppend(h.ctx, p)
	require.ErrorContains(t, err, "tree_settle.used.tokens")
}

// testTreeReserveConcurrent: reservations racing from many sessions (on
// PostgreSQL, from many connections, as nodes would) are decided one after
// another: exactly the calls that fit are granted.
func testTreeReserveConcurrent(t *testing.T, h *harness) {
	const n = 12
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("ses_%02d", i)
	}
	th := newTree(t, h, "ses_root", store.TreeAmounts{ModelCalls: 5, CostUSD: 10}, ids...)
	// One settled call gives the estimate (0.1): cost does not bind.
	th.reserve(ids[0], "res_first", store.TreeCallModel)
	th.settle(ids[0], store.TreeAmounts{CostUSD: 0.1, ModelCalls: 1}, "res_first")

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
	)
	for _, id := range ids {
		wg.Go(func() {
			res, err := h.s.TreeReserve(h.ctx, &store.TreeReserveParams{
				RootID: th.root, ID: "res_" + id, Lease: th.leases[id], Kind: store.TreeCallModel, Now: at(2 * time.Second),
			})
			if !assertNoError(t, err) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Outcome == store.TreeGranted {
				granted++
			}
		})
	}
	wg.Wait()
	require.Equal(t, 4, granted, "five model calls, one spent")
	require.Equal(t, int64(4), th.ledger().Reserved.ModelCalls)
}
