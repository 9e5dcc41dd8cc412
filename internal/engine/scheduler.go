package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var errLeaseLost = errors.New("lease lost")

// maxIdleWorkers bounds the goroutines kept waiting for the next claim
// (schedule): a few, whatever the number of sessions, since a session
// that waits holds no goroutine, and none is kept for it.
const maxIdleWorkers = 2

// schedule claims runnable sessions while worker slots are free and runs each
// in its own goroutine until it waits, ends or the engine stops. Sessions that
// wait hold nothing here: they come back through a claim when runnable.
func (e *Engine) schedule(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	// A claim runs on a goroutine that ran one before, if one is idle: a
	// new goroutine grows its stack from a few kilobytes to what a step
	// takes (SQLite's code, the JSON encoders) by copying it over and
	// over, a few percent of a serial step's CPU. Up to maxIdleWorkers
	// wait for a claim; they end with the scheduler.
	jobs := make(chan job)
	stop := make(chan struct{})
	defer close(stop) // before wg.Wait: the idle ones end
	var idle atomic.Int32
	// work runs a session whose worker slot is taken, and frees the slot.
	work := func(j job) {
		defer func() { <-e.slots; e.kick() }()
		e.runSession(ctx, j)
	}
	run := func(j job) {
		select {
		case jobs <- j: // an idle worker took it
			return
		default:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				work(j)
				if idle.Add(1) > maxIdleWorkers {
					idle.Add(-1)
					return
				}
				select {
				case j = <-jobs:
					idle.Add(-1)
				case <-stop:
					return
				}
			}
		}()
	}
	// Sessions created here with a lease (createSession) that have not
	// started when the engine stops are given back.
	defer e.releaseHandedOff()
	// The poll's timer is armed once per interval, whatever else wakes the
	// scheduler meanwhile: re-armed at each wake-up, it would never fire
	// on a node whose sessions start or end more often than the interval,
	// and those wake-ups claim nothing (claimDue).
	poll := e.clock.After(e.cfg.PollInterval)
	// claimDue says whether a claim may find work. It is set when the
	// engine starts, when a session became claimable (a runnable notice:
	// a creation without a lease, a release, a decision, another node's,
	// a listener that lost its notices), at each poll interval (expired
	// leases and passed wake times, which nobody announces), and while a
	// claim fills every slot it asked for or fails. A claim clears it as
	// it starts, so a notice that arrives during the claim sets it again,
	// and a notice heard while no slot was free keeps it set until one
	// frees. What else wakes the scheduler, a worker freeing its slot or
	// a session handed off by its creator, makes nothing claimable: a
	// claim then found nothing, three times per session run serially (a
	// round trip and a scan of the claimable sessions each, on
	// PostgreSQL).
	claimDue := true
	for {
		if e.isDraining() || ctx.Err() != nil {
			return
		}
		e.runHandedOff(ctx, run)
		free := cap(e.slots) - len(e.slots)
		// Below the free-space floor nothing new is claimed: a session
		// started now would soon fail its writes. The check runs at every
		// pass, so work resumes by itself once space returns.
		if free > 0 && claimDue && e.checkSpace() == nil {
			claimDue = false
			now := e.clock.Now()
			leases, err := e.store.LeaseClaim(ctx, &store.LeaseClaimParams{
				Owner: e.cfg.NodeID, Now: now, ExpiresAt: now.Add(e.cfg.LeaseTTL), Limit: free,
			})
			if err != nil && ctx.Err() == nil {
				e.log.Error("claim sessions", "err", err)
			}
			if err != nil || len(leases) == free {
				// Failed, or all asked for: more may wait.
				claimDue = true
			}
			if err == nil {
				// All asked for: more may wait; fewer: none does.
				e.backlog.Store(len(leases) == free)
			}
			for _, l := range leases {
				if !e.freshLease(ctx, l) {
					e.giveBack(ctx, l)
					continue
				}
				select {
				case e.slots <- struct{}{}:
					run(job{lease: l})
				default:
					// A session created meanwhile took the slot
					// (createSession): this one waits for the next.
					e.backlog.Store(true)
					claimDue = true
					e.giveBack(ctx, l)
				}
			}
			if len(leases) == free && free > 0 {
				continue // there may be more work waiting for a slot
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case j := <-e.handoff:
			e.runHandedOffJob(ctx, j, run)
		case <-e.hub.runnable:
			claimDue = true
		case <-poll:
			claimDue = true
			poll = e.clock.After(e.cfg.PollInterval)
		}
	}
}

// freshLease renews a lease that spent more than a third of its life
// reaching its runner: a claim or a creation that waited in the store's
// queue (a stalled disk, a busy database), a session handed off while the
// scheduler was in such a claim, or a scheduler that was not scheduled
// meanwhile computed its expiry from a time long gone. Born about to
// expire, or expired, it could be taken over by the next claim, this
// node's or another's, while its runner starts its first call, and the
// taker would find that call started by a worker that stalled: in doubt
// when it is irreversible, a person's decision for nothing. The scheduler
// renews it before it claims again. It reports false when the lease could
// not be made fresh (taken over meanwhile, or the renewal failed or came
// late again): its runner must not start, and the caller gives it back
// (a lost lease's give-back does nothing).
func (e *Engine) freshLease(ctx context.Context, l store.Lease) bool {
	for attempt := 0; ; attempt++ {
		now := e.clock.Now()
		if l.ExpiresAt.Sub(now) > e.cfg.LeaseTTL*2/3 {
			return true
		}
		if attempt == maxLateRenewals {
			e.log.Warn("a lease kept reaching this node late; given back", "session", l.SessionID, "epoch", l.Epoch)
			return false
		}
		l.ExpiresAt = now.Add(e.cfg.LeaseTTL)
		err := e.store.LeaseRenew(ctx, l, l.ExpiresAt)
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			e.log.Warn("a lease reached this node expired and was taken over; its session runs elsewhere", "session", l.SessionID, "epoch", l.Epoch)
			return false
		case err != nil:
			e.log.Warn("renew a lease that reached this node late; given back", "session", l.SessionID, "err", err)
			return false
		}
		// Renewed: fresh unless the renewal itself waited that long.
	}
}

// maxLateRenewals bounds freshLease's renewals of one lease.
const maxLateRenewals = 3

// reserveWorker takes a worker slot for a session about to be created
// with a lease, if the engine runs, is not draining, has a slot free and
// space to work in, and no runnable session is known to wait for a slot
// (backlog): those are older and are claimed first.
func (e *Engine) reserveWorker() bool {
	if e.backlog.Load() || e.checkSpace() != nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel == nil || e.draining {
		return false
	}
	select {
	case e.slots <- struct{}{}:
		return true
	default:
		// The session is queued: later ones wait behind it.
		e.backlog.Store(true)
		return false
	}
}

// releaseWorker frees a slot reserveWorker took.
func (e *Engine) releaseWorker() {
	<-e.slots
	e.kick()
}

// job is a session for a worker to run: its lease, and for a session this
// node created with it, what the creation stored.
type job struct {
	lease   store.Lease
	created *created // nil: claimed; the runner reads the session
}

// created is what a session's creation stored, with the lease it was
// created with: its runner starts from it instead of reading the session
// back, which it would find the same but for the writes made since, as it
// would after any read (its first look, and every conditional append,
// see those). The claim's watch was subscribed before the creation, so it
// hears every append after it, as a claim's hears every append after the
// runner's first read (claimWatch).
type created struct {
	row    store.SessionRow // with LastSeq
	events []store.Event
	claim  *claimWatch
	// pending, when set, is the creation itself, not written yet: the
	// runner writes it (createjoin.go), and row and events are what it
	// will write.
	pending *pendingCreation
}

// pendingCreation is the job's session's creation if its runner is to write
// it (createjoin.go).
func (j *job) pendingCreation() *pendingCreation {
	if j.created == nil {
		return nil
	}
	return j.created.pending
}

// handOff passes a session created with a lease to the scheduler, which
// runs it in the slot reserveWorker took. If the engine began to drain
// meanwhile, the lease is given back instead.
func (e *Engine) handOff(ctx context.Context, j job) {
	e.mu.Lock()
	if !e.draining {
		// Never blocks: each job in the channel holds one of the slots,
		// and the channel has room for as many.
		e.handoff <- j
		e.mu.Unlock()
		e.kick()
		return
	}
	e.mu.Unlock()
	e.release(ctx, j)
}

// release gives back the lease of a job handed off but not run, and its
// slot.
func (e *Engine) release(ctx context.Context, j job) {
	if j.created != nil {
		j.created.claim.stop()
		if pc := j.pendingCreation(); pc != nil {
			// Written now, not leased, or never: no lease to give back.
			// Or written by its creator meanwhile: given back once it is.
			if e.abandonCreation(ctx, pc) || pc.wait(context.WithoutCancel(ctx)) != nil {
				e.releaseWorker()
				return
			}
		}
	}
	e.giveBack(ctx, j.lease)
	e.releaseWorker()
}

// runHandedOff runs the sessions handed off so far.
func (e *Engine) runHandedOff(ctx context.Context, run func(job)) {
	for {
		select {
		case j := <-e.handoff:
			e.runHandedOffJob(ctx, j, run)
		default:
			return
		}
	}
}

// runHandedOffJob runs a session handed off by its creation, its lease
// made fresh first: it may have waited for the scheduler while a claim
// stalled (freshLease).
func (e *Engine) runHandedOffJob(ctx context.Context, j job, run func(job)) {
	if pc := j.pendingCreation(); pc != nil {
		if pc.untaken() {
			// Not written yet: its runner writes it, and the lease's
			// life starts with the write (createjoin.go).
			run(j)
			return
		}
		// Written alone by its creator, which waited for the
		// scheduler too long: under the lease as written.
		if err := pc.wait(ctx); err != nil {
			j.created.claim.stop()
			e.releaseWorker() // no session, no lease
			return
		}
		j.lease.ExpiresAt = pc.expires
	}
	if !e.freshLease(ctx, j.lease) {
		e.release(ctx, j)
		return
	}
	run(j)
}

// releaseHandedOff gives back the leases handed off but not run. The
// engine is draining, so handOff adds no more.
func (e *Engine) releaseHandedOff() {
	for {
		select {
		case j := <-e.handoff:
			e.release(context.Background(), j)
		default:
			return
		}
	}
}

// giveBack releases a lease that no worker here will use, so the session
// can be claimed at once (else it would wait for the lease to expire).
func (e *Engine) giveBack(ctx context.Context, l store.Lease) {
	if err := e.store.LeaseRelease(context.WithoutCancel(ctx), l); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		e.log.Warn("release lease", "session", l.SessionID, "err", err)
	}
}

// runSession runs one claimed session under its lease, renewing the lease
// while it works. Losing the lease cancels the work before its next write.
func (e *Engine) runSession(parent context.Context, j job) {
	l, start := j.lease, j.created
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	renewed := make(chan struct{})
	var pending *pendingCreation // the creation its runner writes (createjoin.go)
	if start != nil {
		pending = start.pending
	}
	go func(pending *pendingCreation) {
		defer close(renewed)
		if pending != nil {
			// Nothing to renew before the session is written, nor
			// after its creation failed.
			select {
			case <-pending.done:
				if pending.err != nil {
					return
				}
			case <-ctx.Done():
				return
			}
		}
		e.renewLease(ctx, cancel, l)
	}(pending)
	defer func() { cancel(nil); <-renewed }()
	// A person's change of the workspace on this node waits for no runner
	// and none starts during one (workspacesync.go).
	defer e.wsLocks.share(l.SessionID)()

	// Subscribed before any runner reads the session (claimWatch), or
	// before the session was created.
	var claim *claimWatch
	if start != nil {
		claim = start.claim
	} else {
		claim = e.watchClaim(l.SessionID)
	}
	defer claim.stop()
	var err error
	var restoreFailed *restoreFailedError
	var lostCalls map[string]string // why calls were lost (runner.lostCalls)
	for attempt, lost, waits, unreachable := 0, 0, 0, 0; ; {
		var r *runner
		r, err = e.newRunnerFrom(ctx, l, start)
		start = nil // a runner that starts over reads the journal
		if err == nil {
			r.claim, r.lostCalls = claim, lostCalls
			err = r.run(ctx)
			r.env.close()
			lostCalls = r.lostCalls
			if err == nil {
				r.leftCopy()
			}
		}
		if pending != nil {
			if !e.settleCreation(ctx, pending, l, err) {
				return
			}
			pending = nil
		}
		if errors.Is(err, errStaleBatch) && attempt < maxStaleRestarts {
			// An API write made the runner's unsaved events impossible (e.g.
			// a person decided an approval the runner was expiring): start
			// over from the journal under the same lease.
			attempt++
			e.log.Debug("restarting the session's runner on the newer journal", "session", l.SessionID, "err", err)
			continue
		}
		if errors.Is(err, errEnvironmentLost) && lost < maxEnvironmentLosses && ctx.Err() == nil {
			// The call's outcome is in the journal as a crash's would be;
			// the next runner opens the environment again and settles it,
			// after a backoff: a runner whose connection keeps breaking
			// is not hammered.
			lost++
			if !e.sleep(ctx, lossBackoff(lost)) {
				break
			}
			continue
		}
		if errors.Is(err, errChangesWaiting) && waits < maxChangeWaits && ctx.Err() == nil {
			// Nothing was restored: the same changes are tried again on
			// the same workspace after a backoff.
			waits++
			e.log.Warn("a person's change waits to be applied to the runner's workspace", "session", l.SessionID, "err", err)
			if !e.sleep(ctx, lossBackoff(waits)) {
				break
			}
			continue
		}
		if errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrLeaseLost) && unreachable < maxUnavailableRestarts && ctx.Err() == nil {
			// The database went away under a write (a restart, a
			// failover): whether that write was committed is unknown, so
			// the runner starts over from the journal once it answers
			// again, as a resume after a crash would. A write made after
			// the lease expired meanwhile is fenced (ErrLeaseLost).
			unreachable++
			e.log.Warn("the database is out of reach: the session starts over from its journal", "session", l.SessionID, "err", err)
			if !e.sleep(ctx, lossBackoff(unreachable)) {
				break
			}
			continue
		}
		if store.IsStorageFull(err) && !errors.Is(err, store.ErrLeaseLost) && e.awaitSpace(ctx, l, err) {
			// Space is back: start over from the journal, as a resume after
			// a crash would, so the write that failed is made again (or the
			// call whose outcome it recorded is sorted out by the ledger).
			continue
		}
		break
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrLeaseLost) || errors.Is(context.Cause(ctx), errLeaseLost):
		e.log.Warn("lease lost; another worker owns the session now", "session", l.SessionID, "epoch", l.Epoch, "err", err)
	case errors.Is(context.Cause(ctx), errShutdown):
		// Hard stop: whatever ran is in the ledger as started; a resume sorts it out.
	case errors.Is(err, store.ErrUnavailable):
		// Still out of reach: the session is not at fault, so it is not
		// failed. Its lease is given back if the database lets it, else
		// it expires; either way the session is claimed again.
		e.log.Warn("session left while the database is out of reach", "session", l.SessionID, "err", err)
		e.giveBack(ctx, l)
	case store.IsStorageFull(err):
		// Stopped (drain) while waiting for space: the session is not at
		// fault, so it is not failed. Its lease is given back when the
		// disk lets it; else it expires and the session is claimed again.
		e.log.Warn("session left waiting for disk space", "session", l.SessionID, "err", err)
		if rerr := e.store.LeaseRelease(context.WithoutCancel(ctx), l); rerr != nil && !errors.Is(rerr, store.ErrLeaseLost) {
			e.log.Warn("release lease", "session", l.SessionID, "err", rerr)
		}
	case errors.Is(err, errChangesWaiting):
		e.log.Warn("a person's change could not be applied to the runner's workspace", "session", l.SessionID, "err", err)
		e.failTurnOf(context.WithoutCancel(ctx), l, lt.StopSandboxError, fmt.Sprintf("%v (tried %d times)", err, maxChangeWaits+1))
	case errors.As(err, &restoreFailed):
		// Not an internal error: the environment (a runner, most often)
		// keeps failing its restores; the turn says so.
		e.log.Warn("the session's workspace could not be restored", "session", l.SessionID, "err", err)
		e.failTurnOf(context.WithoutCancel(ctx), l, lt.StopSandboxError, restoreFailed.Error())
	default:
		e.log.Error("session run failed", "session", l.SessionID, "err", err)
		e.failInternal(context.WithoutCancel(ctx), l, err)
	}
}

// awaitSpace holds a session whose write failed for want of space until
// space returns, keeping its lease (renewLease goes on; a renewal that the
// full disk refuses is retried at the next tick). It returns true when the
// session should run again from its journal, false when ctx ended first.
// Without a free-space check (Config.FreeSpace) it waits one poll interval
// and lets the next attempt find out.
func (e *Engine) awaitSpace(ctx context.Context, l store.Lease, cause error) bool {
	e.log.Warn("the data volume is full: the session waits for space, then resumes from its journal",
		"session", l.SessionID, "err", cause)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-e.clock.After(e.cfg.PollInterval):
		}
		if e.isDraining() {
			// Stop does not wait for the disk: the lease is given back.
			return false
		}
		if e.checkSpace() == nil {
			e.log.Info("space is back: resuming the session from its journal", "session", l.SessionID)
			return true
		}
	}
}

func (e *Engine) renewLease(ctx context.Context, cancel context.CancelCauseFunc, l store.Lease) {
	every := e.cfg.LeaseTTL / 3
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.clock.After(every):
		}
		err := e.store.LeaseRenew(ctx, l, e.clock.Now().Add(e.cfg.LeaseTTL))
		if errors.Is(err, store.ErrLeaseLost) {
			cancel(errLeaseLost)
			return
		}
		if err != nil && ctx.Err() == nil {
			e.log.Warn("renew lease", "session", l.SessionID, "err", err)
		}
	}
}

// lossBackoff is how long a claim waits before its n-th start over after
// its environment went away (1 s, 2 s, 4 s, ..., at most
// maxLossBackoff).
func lossBackoff(n int) time.Duration {
	return min(time.Second<<min(max(n-1, 0), 10), maxLossBackoff)
}

// maxUnavailableRestarts bounds how often one claim starts over because
// the database was out of reach (1+2+4+8+16 s of backoff), before it gives
// the session back.
const maxUnavailableRestarts = 5

// maxLossBackoff bounds lossBackoff.
const maxLossBackoff = 30 * time.Second

// sleep waits d on the engine's clock; false when ctx ended first.
func (e *Engine) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-e.clock.After(d):
		return true
	}
}
