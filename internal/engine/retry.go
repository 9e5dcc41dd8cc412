package engine

import (
	"context"
	"hash/fnv"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Retry defaults, used where an agent's retry policy leaves a field zero.
const (
	defaultInitialBackoff = time.Second
	defaultMaxBackoff     = time.Minute
)

// maxAttempts is how many times one model or tool call may be tried.
func (r *runner) maxAttempts() int {
	if p := r.spec.Retry; p != nil && p.MaxAttempts > 0 {
		return p.MaxAttempts
	}
	return r.e.cfg.MaxModelAttempts
}

// backoff is the wait before attempt+1 of a call: exponential from the
// initial backoff, capped, with "equal jitter" (half fixed, half spread) so
// sessions that failed together do not retry together. The jitter is drawn
// from a hash of the session and the call, not from a random source, so a
// replay of the journal waits the same. A longer Retry-After wins.
func (r *runner) backoff(attempt int, retryAfter time.Duration, call string) time.Duration {
	initial, ceiling := defaultInitialBackoff, defaultMaxBackoff
	if p := r.spec.Retry; p != nil {
		if p.InitialBackoffMS > 0 {
			initial = time.Duration(p.InitialBackoffMS) * time.Millisecond
		}
		if p.MaxBackoffMS > 0 {
			ceiling = time.Duration(p.MaxBackoffMS) * time.Millisecond
		}
	}
	base := initial
	for i := 1; i < attempt && base < ceiling; i++ {
		base *= 2
	}
	base = min(base, ceiling)
	h := fnv.New64a()
	_, _ = h.Write([]byte(r.st.Session.ID + "\x00" + call))
	_, _ = h.Write([]byte{byte(attempt)})
	frac := float64(h.Sum64()%1024) / 1024
	wait := base/2 + time.Duration(frac*float64(base/2))
	return max(wait, retryAfter)
}

// backOff makes the failed attempt durable, then waits before the next
// one. Durable first: a crash during the wait must neither lose the attempt
// nor replay a model position the provider already consumed.
func (r *runner) backOff(ctx context.Context, wait time.Duration) error {
	if err := r.flush(ctx, false); err != nil {
		return err
	}
	// A deadline of the turn or a cancel ends the wait early: the next
	// tick's checks then stop the turn instead of trying again (a cancel,
	// written by another, is read in first).
	wctx, release := r.callContext(ctx, true)
	defer release()
	select {
	case <-wctx.Done():
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if cause := interruption(ctx, wctx); cause != nil && cause.kind == interruptCancel {
			return r.merge(ctx)
		}
		return nil
	case <-r.e.clock.After(wait):
		return nil
	}
}

// retryable reports whether a failed tool call may run again by itself: only
// when the failure was transient and re-running cannot repeat an effect
// (DESIGN.md principle 3: irreversible calls are never retried blindly).
func retryable(class lt.EffectClass, transient bool) bool {
	return transient && class != lt.EffectIrreversible
}
