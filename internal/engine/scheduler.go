package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/store"
)

var errLeaseLost = errors.New("lease lost")

// schedule claims runnable sessions while worker slots are free and runs each
// in its own goroutine until it waits, ends or the engine stops. Sessions that
// wait hold nothing here: they come back through a claim when runnable.
func (e *Engine) schedule(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		if e.isDraining() || ctx.Err() != nil {
			return
		}
		free := cap(e.slots) - len(e.slots)
		// Below the free-space floor nothing new is claimed: a session
		// started now would soon fail its writes. The check runs at every
		// pass, so work resumes by itself once space returns.
		if free > 0 && e.checkSpace() == nil {
			now := e.clock.Now()
			leases, err := e.store.LeaseClaim(ctx, &store.LeaseClaimParams{
				Owner: e.cfg.NodeID, Now: now, ExpiresAt: now.Add(e.cfg.LeaseTTL), Limit: free,
			})
			if err != nil && ctx.Err() == nil {
				e.log.Error("claim sessions", "err", err)
			}
			for _, l := range leases {
				e.slots <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-e.slots; e.kick() }()
					e.runSession(ctx, l)
				}()
			}
			if len(leases) == free && free > 0 {
				continue // there may be more work waiting for a slot
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-e.hub.runnable:
		case <-e.clock.After(e.cfg.PollInterval):
		}
	}
}

// runSession runs one claimed session under its lease, renewing the lease
// while it works. Losing the lease cancels the work before its next write.
func (e *Engine) runSession(parent context.Context, l store.Lease) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		e.renewLease(ctx, cancel, l)
	}()
	defer func() { cancel(nil); <-renewed }()
	// A person's change of the workspace on this node waits for no runner
	// and none starts during one (workspacesync.go).
	defer e.wsLocks.share(l.SessionID)()
	// Watched before the runner reads the session: whatever another writer
	// appends after that read is announced here (unless the store's notice
	// is lost: the cancel watch also polls).
	grew, stopWatch := e.hub.watch(l.SessionID)
	defer stopWatch()

	var err error
	for attempt := 0; ; {
		var r *runner
		r, err = e.newRunner(ctx, l)
		if err == nil {
			r.grew = grew
			err = r.run(ctx)
			r.env.close()
		}
		if errors.Is(err, errStaleBatch) && attempt < maxStaleRestarts {
			// An API write made the runner's unsaved events impossible (e.g.
			// a person decided an approval the runner was expiring): start
			// over from the journal under the same lease.
			attempt++
			e.log.Debug("restarting the session's runner on the newer journal", "session", l.SessionID, "err", err)
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
	case store.IsStorageFull(err):
		// Stopped (drain) while waiting for space: the session is not at
		// fault, so it is not failed. Its lease is given back when the
		// disk lets it; else it expires and the session is claimed again.
		e.log.Warn("session left waiting for disk space", "session", l.SessionID, "err", err)
		if rerr := e.store.LeaseRelease(context.WithoutCancel(ctx), l); rerr != nil && !errors.Is(rerr, store.ErrLeaseLost) {
			e.log.Warn("release lease", "session", l.SessionID, "err", rerr)
		}
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
