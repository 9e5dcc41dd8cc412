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
		if free > 0 {
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

	var err error
	for attempt := 0; ; attempt++ {
		var r *runner
		r, err = e.newRunner(ctx, l)
		if err == nil {
			err = r.run(ctx)
			r.env.close()
		}
		if !errors.Is(err, errStaleBatch) || attempt >= maxStaleRestarts {
			break
		}
		// An API write made the runner's unsaved events impossible (e.g. a
		// person decided an approval the runner was expiring): start over
		// from the journal under the same lease.
		e.log.Debug("restarting the session's runner on the newer journal", "session", l.SessionID, "err", err)
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrLeaseLost) || errors.Is(context.Cause(ctx), errLeaseLost):
		e.log.Warn("lease lost; another worker owns the session now", "session", l.SessionID, "epoch", l.Epoch, "err", err)
	case errors.Is(context.Cause(ctx), errShutdown):
		// Hard stop: whatever ran is in the ledger as started; a resume sorts it out.
	default:
		e.log.Error("session run failed", "session", l.SessionID, "err", err)
		e.failInternal(context.WithoutCancel(ctx), l, err)
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
