package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

// waitFor is how long the suite waits for something asynchronous (a
// notification, a closed channel) before failing. It is a deadline, not a
// delay: a passing test never waits for it.
const waitFor = 10 * time.Second

// expect receives from ch until a notification equal to want arrives
// (others, such as the same commit's other kind, are skipped).
func expect(t *testing.T, ch <-chan store.Notification, want store.Notification) {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		select {
		case n, ok := <-ch:
			require.True(t, ok, "channel closed while waiting for %+v", want)
			if n == want {
				return
			}
		case <-deadline.C:
			require.FailNow(t, "notification not received", "%+v", want)
		}
	}
}

// expectClosed drains ch until it is closed.
func expectClosed(t *testing.T, ch <-chan store.Notification) {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline.C:
			require.FailNow(t, "channel not closed")
		}
	}
}

func testSubscribeEvents(t *testing.T, h *harness) {
	ch, cancel := h.s.Subscribe(h.ctx)
	defer cancel()

	h.createSession("ses_sub", runnable)
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_sub", Seq: 1, Status: "queued"})
	expect(t, ch, store.Notification{Kind: store.KindRunnable, SessionID: "ses_sub"})

	h.append("ses_sub", 1, 2)
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_sub", Seq: 3, Status: "running"})

	wake := at(time.Hour)
	h.append("ses_sub", 3, 1, func(p *store.EventAppendParams) { p.WakeAt = &wake })
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_sub", Seq: 4, Status: "running"})
	expect(t, ch, store.Notification{Kind: store.KindRunnable, SessionID: "ses_sub"})

	// A released lease of a runnable session makes it claimable.
	h.append("ses_sub", 4, 1, func(p *store.EventAppendParams) { p.Runnable = true })
	l := h.claim("w1", at(time.Second), ttl, 1)[0]
	require.NoError(t, h.s.LeaseRelease(h.ctx, l))
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_sub", Seq: 5, Status: "running"})
	expect(t, ch, store.Notification{Kind: store.KindRunnable, SessionID: "ses_sub"})

	// Two subscribers both hear a commit.
	ch2, cancel2 := h.s.Subscribe(h.ctx)
	defer cancel2()
	h.append("ses_sub", 5, 1)
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_sub", Seq: 6, Status: "running"})
	expect(t, ch2, store.Notification{Kind: store.KindEvents, SessionID: "ses_sub", Seq: 6, Status: "running"})

	// The status an append stores is announced with it (a waiter for the
	// session's end reads no row).
	h.append("ses_sub", 6, 2, func(p *store.EventAppendParams) { p.Status = "idle" })
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_sub", Seq: 8, Status: "idle"})

	// A pending action recorded is announced as such (a node trusting
	// that none waits looks again).
	h.append("ses_sub", 8, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{doc(store.DocAction, "act_sub", store.ActionStatusPending, `{"id":"act_sub"}`, at(time.Second))}
	})
	expect(t, ch, store.Notification{Kind: store.KindActionRaised, SessionID: "ses_sub"})
}

// testLeaseHoldersAppendClaimsNothing: a worker's append that keeps its
// lease leaves its session claimed, so schedulers hear no KindRunnable (on
// one node, every step would send the node's own scheduler into a claim
// that finds nothing); the append that releases the lease is announced.
func testLeaseHoldersAppendClaimsNothing(t *testing.T, h *harness) {
	h.createSession("ses_held", runnable)
	l := h.claim("w1", at(time.Second), ttl, 1)[0]
	ch, cancel := h.s.Subscribe(h.ctx)
	defer cancel()

	h.append("ses_held", 1, 1, func(p *store.EventAppendParams) { p.Runnable, p.Fence = true, &l })
	// A marker after it: an unfenced append making another session
	// claimable. Until both are heard, no KindRunnable may name ses_held.
	h.createSession("ses_marker")
	h.append("ses_marker", 1, 1, func(p *store.EventAppendParams) { p.Runnable = true })
	heldSeen, markerSeen := false, false
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for !heldSeen || !markerSeen {
		select {
		case n, ok := <-ch:
			require.True(t, ok, "channel closed")
			require.NotEqual(t, store.Notification{Kind: store.KindRunnable, SessionID: "ses_held"}, n,
				"a lease holder's append that keeps its lease announced its session claimable")
			heldSeen = heldSeen || n == store.Notification{Kind: store.KindEvents, SessionID: "ses_held", Seq: 2, Status: "running"}
			markerSeen = markerSeen || n == store.Notification{Kind: store.KindRunnable, SessionID: "ses_marker"}
		case <-deadline.C:
			require.FailNow(t, "notifications not received", "held's events %v, marker's runnable %v", heldSeen, markerSeen)
		}
	}

	// The append that releases the lease makes it claimable: announced.
	h.append("ses_held", 2, 1, func(p *store.EventAppendParams) { p.Runnable, p.Fence, p.ReleaseLease = true, &l, true })
	expect(t, ch, store.Notification{Kind: store.KindRunnable, SessionID: "ses_held"})
	require.ElementsMatch(t, []string{"ses_held", "ses_marker"}, leaseIDs(h.claim("w2", at(2*time.Second), ttl, 2)))
}

func testSubscribeCancel(t *testing.T, h *harness) {
	ch, cancel := h.s.Subscribe(h.ctx)
	cancel()
	expectClosed(t, ch)
	cancel() // a second cancel is harmless

	ctx, stop := context.WithCancel(h.ctx)
	ch, cancel = h.s.Subscribe(ctx)
	defer cancel()
	stop()
	expectClosed(t, ch)

	// Writes after the subscribers left still work.
	h.createSession("ses_after", runnable)
}

func testNotFound(t *testing.T, h *harness) {
	ctx := h.ctx
	_, err := h.s.SessionGet(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound, "SessionGet")
	_, err = h.s.EventAppend(ctx, appendParams("nope", 0, 1))
	require.ErrorIs(t, err, store.ErrNotFound, "EventAppend")
	p := appendParams("nope", 0, 1)
	p.Fence = &store.Lease{SessionID: "nope", Owner: "w", Epoch: 1}
	_, err = h.s.EventAppend(ctx, p)
	require.ErrorIs(t, err, store.ErrNotFound, "fenced EventAppend")
	_, err = h.s.EventList(ctx, "nope", 0, 10)
	require.ErrorIs(t, err, store.ErrNotFound, "EventList")
	_, err = h.s.TurnList(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound, "TurnList")
	_, err = h.s.ActionList(ctx, "nope", "")
	require.ErrorIs(t, err, store.ErrNotFound, "ActionList")
	_, err = h.s.EffectList(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound, "EffectList")
	_, err = h.s.ArtifactList(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound, "ArtifactList")
	_, err = h.s.CheckpointList(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound, "CheckpointList")
	_, err = h.s.TurnGet(ctx, "nope", "turn_1")
	require.ErrorIs(t, err, store.ErrNotFound, "TurnGet")
	_, err = h.s.ActionGet(ctx, "nope", "act_1")
	require.ErrorIs(t, err, store.ErrNotFound, "ActionGet")
	_, err = h.s.ArtifactGet(ctx, "art_nope")
	require.ErrorIs(t, err, store.ErrNotFound, "ArtifactGet")
	_, err = h.s.AgentGet(ctx, project, "nope", 0)
	require.ErrorIs(t, err, store.ErrNotFound, "AgentGet")
	_, err = h.s.IdempotencyGet(ctx, "scope", "nope")
	require.ErrorIs(t, err, store.ErrNotFound, "IdempotencyGet")
	_, err = h.s.BlobGet(ctx, sha([]byte("nope")))
	require.ErrorIs(t, err, store.ErrNotFound, "BlobGet")
	l := store.Lease{SessionID: "nope", Owner: "w", Epoch: 1}
	require.ErrorIs(t, h.s.LeaseRenew(ctx, l, at(time.Hour)), store.ErrNotFound, "LeaseRenew")
	require.ErrorIs(t, h.s.LeaseRelease(ctx, l), store.ErrNotFound, "LeaseRelease")

	// Nothing claimable is an empty result, not an error.
	h.createSession("ses_parked")
	none, err := h.s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "w", Now: t0, ExpiresAt: at(ttl), Limit: 5})
	require.NoError(t, err)
	require.Empty(t, none)
}

func testClosed(t *testing.T, h *harness) {
	h.createSession("ses_closed")
	require.NoError(t, h.s.Close())
	require.NoError(t, h.s.Close(), "a second Close is harmless")

	_, err := h.s.SessionGet(h.ctx, "ses_closed")
	require.ErrorIs(t, err, store.ErrClosed, "SessionGet")
	_, err = h.s.EventAppend(h.ctx, appendParams("ses_closed", 1, 1))
	require.ErrorIs(t, err, store.ErrClosed, "EventAppend")
	_, err = h.s.LeaseClaim(h.ctx, &store.LeaseClaimParams{Owner: "w", Now: t0, ExpiresAt: at(ttl), Limit: 1})
	require.ErrorIs(t, err, store.ErrClosed, "LeaseClaim")
	_, err = h.s.EventList(h.ctx, "ses_closed", 0, 10)
	require.ErrorIs(t, err, store.ErrClosed, "EventList")
	require.ErrorIs(t, h.s.Ping(h.ctx), store.ErrClosed, "Ping")
}
