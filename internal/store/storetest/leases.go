package storetest

import (
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

const ttl = 30 * time.Second

// testFencing: a worker whose lease expired and was taken over is a zombie;
// it can neither append nor renew, whatever seq it expects.
func testFencing(t *testing.T, h *harness) {
	h.createSession("ses_fence", runnable)

	leases := h.claim("worker-a", at(time.Second), ttl, 10)
	require.Len(t, leases, 1)
	a := leases[0]
	require.Equal(t, store.Lease{SessionID: "ses_fence", Owner: "worker-a", Epoch: 1, ExpiresAt: at(time.Second + ttl)}, a)
	got := h.session("ses_fence")
	require.Equal(t, a, got.Lease)

	// worker-a appends under its fence.
	h.append("ses_fence", 1, 2, func(p *store.EventAppendParams) { p.Fence = &a; p.Runnable = true })

	// Before expiry nobody else can claim it.
	require.Empty(t, h.claim("worker-b", at(10*time.Second), ttl, 10))

	// The holder renews. (A renewal succeeds as long as nobody claimed the
	// session, expired or not: the store has no clock of its own.)
	require.NoError(t, h.s.LeaseRenew(h.ctx, a, at(time.Minute)))
	require.Equal(t, at(time.Minute), h.session("ses_fence").Lease.ExpiresAt)
	require.Empty(t, h.claim("worker-b", at(59*time.Second), ttl, 10))

	// It expires; worker-b takes over with the next epoch.
	leases = h.claim("worker-b", at(time.Minute), ttl, 10)
	require.Len(t, leases, 1)
	b := leases[0]
	require.Equal(t, "worker-b", b.Owner)
	require.Equal(t, int64(2), b.Epoch)
	require.Equal(t, "worker-a", b.PreviousOwner, "worker-b took the session over")

	// The zombie's append is refused as lease lost, even with the right seq
	// and even with a wrong one (the fence is checked first).
	for _, expected := range []int64{3, 0, 42} {
		p := appendParams("ses_fence", expected, 1)
		p.Fence = &a
		_, err := h.s.EventAppend(h.ctx, p)
		require.ErrorIs(t, err, store.ErrLeaseLost, "zombie append expecting seq %d", expected)
	}
	require.ErrorIs(t, h.s.LeaseRenew(h.ctx, a, at(2*time.Minute)), store.ErrLeaseLost)
	require.ErrorIs(t, h.s.LeaseRelease(h.ctx, a), store.ErrLeaseLost)

	got = h.session("ses_fence")
	require.Equal(t, int64(3), got.LastSeq, "the zombie wrote nothing")
	held := b
	held.PreviousOwner = "" // what the claim reported, not part of the lease
	require.Equal(t, held, got.Lease)

	// The new holder writes; a stale epoch of the same owner is fenced too.
	h.append("ses_fence", 3, 1, func(p *store.EventAppendParams) { p.Fence = &b })
	stale := b
	stale.Epoch = 1
	p := appendParams("ses_fence", 4, 1)
	p.Fence = &stale
	_, err := h.s.EventAppend(h.ctx, p)
	require.ErrorIs(t, err, store.ErrLeaseLost)

	// An unfenced (API) write still goes through on seq alone.
	h.append("ses_fence", 4, 1)
	require.NoError(t, h.s.LeaseRenew(h.ctx, b, at(2*time.Minute)))
}

// testCreateClaimed: a session created with a claim is leased as its
// first claim would have left it; nobody else claims it while the lease
// lives, its holder writes under it, and it is taken over when it expires.
// Subscribers hear its events but not that it is runnable.
func testCreateClaimed(t *testing.T, h *harness) {
	ch, cancel := h.s.Subscribe(h.ctx)
	defer cancel()
	claim := &store.SessionClaim{Owner: "worker-a", ExpiresAt: at(ttl)}
	h.createSession("ses_claimed", runnable, func(p *store.SessionCreateParams) { p.Claim = claim })
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_claimed", Seq: 1, Status: "queued"})
	a := claim.Lease("ses_claimed")
	require.Equal(t, store.Lease{SessionID: "ses_claimed", Owner: "worker-a", Epoch: 1, ExpiresAt: at(ttl)}, a)
	require.Equal(t, a, h.session("ses_claimed").Lease)

	require.Empty(t, h.claim("worker-b", at(time.Second), ttl, 10), "a live lease is not claimed")
	h.append("ses_claimed", 1, 1, func(p *store.EventAppendParams) { p.Fence = &a; p.Runnable = true })
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_claimed", Seq: 2, Status: "running"})
	require.NoError(t, h.s.LeaseRenew(h.ctx, a, at(time.Minute)))

	leases := h.claim("worker-b", at(time.Minute), ttl, 10)
	require.Len(t, leases, 1)
	require.Equal(t, int64(2), leases[0].Epoch)
	require.Equal(t, "worker-a", leases[0].PreviousOwner)
	p := appendParams("ses_claimed", 2, 1)
	p.Fence = &a
	_, err := h.s.EventAppend(h.ctx, p)
	require.ErrorIs(t, err, store.ErrLeaseLost)

	// A claim needs an owner.
	bad := &store.SessionCreateParams{Session: store.SessionRow{
		ID: "ses_bad_claim", AgentName: "agent", AgentVersion: 1, Status: "queued", CreatedAt: t0, UpdatedAt: t0,
	}, Claim: &store.SessionClaim{ExpiresAt: at(ttl)}}
	_, err = h.s.SessionCreate(h.ctx, bad)
	require.ErrorContains(t, err, "claim.owner")
}

func testClaimRules(t *testing.T, h *harness) {
	// updated_at orders runnable sessions; wake_at orders woken ones.
	h.createSession("ses_runnable_new", runnable, createdAt(at(2*time.Second)))
	h.createSession("ses_runnable_old", runnable, createdAt(at(time.Second)))
	h.createSession("ses_idle")
	h.createSession("ses_wake_due", wakeAt(at(5*time.Second)))
	h.createSession("ses_wake_later", wakeAt(at(time.Hour)))
	h.createSession("ses_wake_first", wakeAt(at(1500*time.Millisecond)))

	now := at(10 * time.Second)
	leases := h.claim("w1", now, ttl, 10)
	require.Equal(t, []string{"ses_runnable_old", "ses_wake_first", "ses_runnable_new", "ses_wake_due"}, leaseIDs(leases),
		"runnable or due sessions, oldest wake first; not idle ones or future wakes")
	for _, l := range leases {
		require.Equal(t, "w1", l.Owner)
		require.Equal(t, int64(1), l.Epoch)
		require.Equal(t, now.Add(ttl), l.ExpiresAt)
		require.Empty(t, l.PreviousOwner, "a free session is not taken over")
	}

	// Live leases are not claimed again, by anyone.
	require.Empty(t, h.claim("w1", now, ttl, 10))
	require.Empty(t, h.claim("w2", now.Add(ttl-time.Microsecond), ttl, 10))

	// The future wake comes due; the expired leases come back too.
	leases = h.claim("w2", at(time.Hour), ttl, 10)
	require.ElementsMatch(t, []string{"ses_runnable_old", "ses_wake_first", "ses_runnable_new", "ses_wake_due", "ses_wake_later"},
		leaseIDs(leases))
	for _, l := range leases {
		want, previous := int64(2), "w1"
		if l.SessionID == "ses_wake_later" {
			want, previous = 1, ""
		}
		require.Equal(t, want, l.Epoch, "epoch of %s", l.SessionID)
		require.Equal(t, previous, l.PreviousOwner, "an expired lease is taken over from its owner: %s", l.SessionID)
	}

	got := h.session("ses_idle")
	require.Empty(t, got.Lease.Owner, "a session that is neither runnable nor waking is never claimed")
}

func testClaimLimitAndEpoch(t *testing.T, h *harness) {
	for i, id := range []string{"ses_a", "ses_b", "ses_c"} {
		h.createSession(id, runnable, createdAt(at(time.Duration(i)*time.Second)))
	}
	first := h.claim("w1", at(time.Minute), ttl, 2)
	require.Equal(t, []string{"ses_a", "ses_b"}, leaseIDs(first))
	second := h.claim("w2", at(time.Minute), ttl, 2)
	require.Equal(t, []string{"ses_c"}, leaseIDs(second))

	// Each claim of the same session bumps its epoch. ses_b and ses_c stay
	// leased, so ses_a is the only claimable session once released.
	cur := first[0]
	for epoch := int64(2); epoch <= 5; epoch++ {
		require.NoError(t, h.s.LeaseRelease(h.ctx, cur))
		leases := h.claim("w3", at(time.Minute), ttl, 1)
		require.Len(t, leases, 1)
		require.Equal(t, "ses_a", leases[0].SessionID)
		require.Equal(t, epoch, leases[0].Epoch)
		cur = leases[0]
	}
	require.NoError(t, h.s.LeaseRelease(h.ctx, cur))
	require.ErrorIs(t, h.s.LeaseRelease(h.ctx, cur), store.ErrLeaseLost, "a released lease is gone")
}

func testReleaseViaAppend(t *testing.T, h *harness) {
	h.createSession("ses_rel", runnable)
	l := h.claim("w1", at(time.Second), ttl, 1)[0]

	// The worker parks the session: not runnable, lease released.
	h.append("ses_rel", 1, 1, func(p *store.EventAppendParams) {
		p.Fence = &l
		p.Status = "requires_action"
		p.Runnable = false
		p.ReleaseLease = true
	})
	got := h.session("ses_rel")
	require.Empty(t, got.Lease.Owner)
	require.Equal(t, int64(1), got.Lease.Epoch, "releasing keeps the epoch")
	require.Empty(t, h.claim("w2", at(2*time.Second), ttl, 1), "a parked session is not claimable")

	// The old fence is dead even though nobody claimed the session.
	p := appendParams("ses_rel", 2, 1)
	p.Fence = &l
	_, err := h.s.EventAppend(h.ctx, p)
	require.ErrorIs(t, err, store.ErrLeaseLost)

	// An API write (a decision) makes it runnable; the next claim bumps the
	// epoch.
	h.append("ses_rel", 2, 1, func(p *store.EventAppendParams) { p.Runnable = true })
	leases := h.claim("w2", at(3*time.Second), ttl, 1)
	require.Len(t, leases, 1)
	require.Equal(t, int64(2), leases[0].Epoch)
}

func testLeaseRelease(t *testing.T, h *harness) {
	h.createSession("ses_lr", runnable)
	a := h.claim("w1", at(time.Second), ttl, 1)[0]
	require.NoError(t, h.s.LeaseRelease(h.ctx, a))
	got := h.session("ses_lr")
	require.Empty(t, got.Lease.Owner)
	require.True(t, got.Runnable, "a release leaves the wake condition")
	require.Equal(t, int64(1), got.Lease.Epoch)

	// Claimable again at once, before the old lease would have expired.
	b := h.claim("w2", at(2*time.Second), ttl, 1)
	require.Len(t, b, 1)
	require.Equal(t, int64(2), b[0].Epoch)
	require.Empty(t, b[0].PreviousOwner, "a released session is not taken over")

	require.ErrorIs(t, h.s.LeaseRelease(h.ctx, a), store.ErrLeaseLost, "releasing a lost lease says so")
	require.ErrorIs(t, h.s.LeaseRenew(h.ctx, a, at(time.Hour)), store.ErrLeaseLost)
	require.Equal(t, b[0], h.session("ses_lr").Lease, "the failed release changed nothing")
}

func testLeaseExpireOwner(t *testing.T, h *harness) {
	h.createSession("ses_n1", runnable)
	h.createSession("ses_n2", wakeAt(at(time.Second)))
	h.createSession("ses_other", runnable, createdAt(at(1500*time.Millisecond)))
	mine := h.claim("node-1", at(2*time.Second), time.Hour, 2)
	require.ElementsMatch(t, []string{"ses_n1", "ses_n2"}, leaseIDs(mine))
	theirs := h.claim("node-2", at(2*time.Second), time.Hour, 1)
	require.Equal(t, []string{"ses_other"}, leaseIDs(theirs))

	n, err := h.s.LeaseExpireOwner(h.ctx, "node-1", at(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = h.s.LeaseExpireOwner(h.ctx, "node-1", at(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 0, n, "expired leases are not counted again")

	// The restarted node (or any other) claims them at once, with new epochs.
	again := h.claim("node-1", at(time.Minute), time.Hour, 10)
	require.ElementsMatch(t, []string{"ses_n1", "ses_n2"}, leaseIDs(again))
	for _, l := range again {
		require.Equal(t, int64(2), l.Epoch)
	}
	require.Equal(t, theirs[0], h.session("ses_other").Lease, "other owners' leases are untouched")

	// The previous incarnation's fence is dead.
	p := appendParams(mine[0].SessionID, 1, 1)
	p.Fence = &mine[0]
	_, err = h.s.EventAppend(h.ctx, p)
	require.ErrorIs(t, err, store.ErrLeaseLost)
}

// testLeaseHandOver: a session handed over to a node is claimed by that
// node only until the hand-over's end, then by any; a claim clears it.
func testLeaseHandOver(t *testing.T, h *harness) {
	h.createSession("ses_ho", runnable)
	a := h.claim("node-a", at(time.Second), ttl, 1)[0]
	require.ErrorContains(t, h.s.LeaseHandOver(h.ctx, a, "", at(time.Minute)), "node")
	require.NoError(t, h.s.LeaseHandOver(h.ctx, a, "node-b", at(time.Minute)))
	require.Empty(t, h.session("ses_ho").Lease.Owner)
	require.ErrorIs(t, h.s.LeaseHandOver(h.ctx, a, "node-b", at(time.Minute)), store.ErrLeaseLost, "a lost lease is not handed over")

	require.Empty(t, h.claim("node-a", at(2*time.Second), ttl, 10), "handed to node-b")
	require.Empty(t, h.claim("node-c", at(2*time.Second), ttl, 10), "handed to node-b")
	b := h.claim("node-b", at(3*time.Second), ttl, 10)
	require.Len(t, b, 1)
	require.Equal(t, "ses_ho", b[0].SessionID)

	// The claim cleared the hand-over: any node claims it after a release.
	require.NoError(t, h.s.LeaseRelease(h.ctx, b[0]))
	c := h.claim("node-c", at(4*time.Second), ttl, 10)
	require.Len(t, c, 1)

	// A hand-over to a node that never claims ends at its time.
	require.NoError(t, h.s.LeaseHandOver(h.ctx, c[0], "node-dead", at(10*time.Second)))
	require.Empty(t, h.claim("node-a", at(9*time.Second), ttl, 10))
	d := h.claim("node-a", at(10*time.Second), ttl, 10)
	require.Len(t, d, 1, "claimable by any node once the hand-over ended")

	// A waiting session handed over wakes for that node only too.
	h.createSession("ses_ho_wait", wakeAt(at(20*time.Second)))
	w := h.claim("node-a", at(21*time.Second), ttl, 10)
	require.Len(t, w, 1)
	require.NoError(t, h.s.LeaseHandOver(h.ctx, w[0], "node-b", at(time.Minute)))
	require.Empty(t, h.claim("node-a", at(22*time.Second), ttl, 10))
	require.Len(t, h.claim("node-b", at(22*time.Second), ttl, 10), 1)
}
