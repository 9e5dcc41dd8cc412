package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/store"
)

// A session created here with a worker free for it (createSession) is not
// written on its own: its runner, which starts from the creation in memory,
// writes it with its first append — the turn's start and the first model
// request — in one transaction, so a new session costs one commit (one
// fsync on SQLite, one round trip on PostgreSQL) fewer. The creator's call
// returns once that transaction has committed, as it returned once the
// creation alone had; nothing outside the engine learns the session's id
// before then, so no API write can come between the creation and that
// append, and the runner reads nothing of the session before it (its first
// tick takes no look: firstRequestOnlyDue).
//
// Whoever takes the creation first writes it (pendingCreation.take):
//   - the runner, with its first append (runner.createWith) — or alone,
//     under its lease, when its first tick must look at the session
//     first or its first append is not one a creation can carry;
//   - the creator, alone and leased, when the runner has not taken it
//     within createJoinWait (a scheduler slow to start it: the call's
//     latency stays bounded), the runner then appending after it;
//   - the engine, alone and not leased (so that any node claims it), when
//     the runner ends before its first append or never starts (a drain).
//
// Either way the session is created once, with the same events first; the
// creator's call returns what that write returned.

// createJoinWait bounds how long a creator waits for the runner to take its
// session's creation before it writes the creation itself. It is a bound on
// latency, not a timer of the session's life: real time, not the engine's
// clock.
const createJoinWait = 50 * time.Millisecond

// joinWait is the engine's createJoinWait.
func (e *Engine) joinWait() time.Duration {
	return cmp.Or(e.cfg.createJoinWait, createJoinWait)
}

// pendingCreation is a session's creation not written yet.
type pendingCreation struct {
	params *store.SessionCreateParams

	mu    sync.Mutex
	taken bool
	done  chan struct{} // closed once written or refused
	err   error
	// expires is the lease's expiry as written, when written alone and
	// leased (writeCreation).
	expires time.Time
}

func newPendingCreation(p *store.SessionCreateParams) *pendingCreation {
	return &pendingCreation{params: p, done: make(chan struct{})}
}

// untaken reports whether nobody has taken the creation yet.
func (p *pendingCreation) untaken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.taken
}

// take reports whether the caller is the one to write the creation (the
// first to ask).
func (p *pendingCreation) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.taken {
		return false
	}
	p.taken = true
	return true
}

// settle records the outcome of the write its taker made.
func (p *pendingCreation) settle(err error) {
	p.err = err
	close(p.done)
}

// wait returns the outcome of the write another took, or ctx's error first.
func (p *pendingCreation) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errCreationFailed ends a runner whose session's creation was refused: there
// is no session to run.
var errCreationFailed = errors.New("the session's creation failed")

// errDrainedUnwritten ends a runner the engine's drain found before its
// session's creation was written.
var errDrainedUnwritten = errors.New("the engine stopped before the session was written")

// writeCreation writes a taken creation alone: leased to this node (its
// runner goes on, with a lease fresh from now), or not leased (claimable by
// any node) when its runner ended or never started. It settles it. A
// creation is written whatever its taker's context says: it runs to its end
// (the creator waits for it, or has given up and learns nothing).
func (e *Engine) writeCreation(ctx context.Context, pc *pendingCreation, leased bool) error {
	p := *pc.params
	if leased {
		p.Claim = &store.SessionClaim{Owner: e.cfg.NodeID, ExpiresAt: e.clock.Now().Add(e.cfg.LeaseTTL)}
		pc.expires = p.Claim.ExpiresAt
	} else {
		p.Claim = nil
	}
	_, err := e.store.SessionCreate(context.WithoutCancel(ctx), &p)
	pc.settle(err)
	return err
}

// awaitCreation waits for a session's creation handed to its runner
// (createSession): its outcome, or, when the runner has not taken it within
// createJoinWait, the creator writes it alone, leased to its runner.
func (e *Engine) awaitCreation(ctx context.Context, pc *pendingCreation) error {
	t := time.NewTimer(e.joinWait())
	defer t.Stop()
	select {
	case <-pc.done:
		return pc.err
	case <-t.C:
		if pc.take() {
			return e.writeCreation(ctx, pc, true)
		}
		return pc.wait(ctx)
	case <-ctx.Done():
		select {
		case <-pc.done:
			return pc.err // an answer there is preferred
		default:
		}
		if pc.take() {
			// Given up before anyone wrote it: it is never written,
			// as a creation whose caller gave up before its write was
			// sent, and its runner ends (errCreationFailed).
			pc.settle(ctx.Err())
			return ctx.Err()
		}
		// Being written: the creator learns only that it does not
		// know (as after any lost reply).
		return ctx.Err()
	}
}

// abandonCreation writes, not leased, the creation of a session whose runner
// ended (or never started) before it took it, so that the session exists
// and any node claims it. It reports whether there was one to write.
func (e *Engine) abandonCreation(ctx context.Context, pc *pendingCreation) bool {
	if pc == nil || !pc.take() {
		return false
	}
	if err := e.writeCreation(ctx, pc, false); err != nil {
		e.log.Warn("create a session whose runner ended before it started", "session", pc.params.Session.ID, "err", err)
	}
	return true
}

// settleCreation sees to the creation of a session whose first runner just
// ended (err its end) and reports whether runSession goes on with the
// session as usual. A creation the runner did not take is written now, not
// leased, so that any node claims the session (this node's scheduler hears
// of it as of any runnable session). One taken by its creator is waited for:
// a runner the drain stopped before it gives its lease back once it is
// written. One whose write failed leaves no session: nothing to run, fail or
// give back, and the copy of the workspace its runner made goes.
func (e *Engine) settleCreation(ctx context.Context, pc *pendingCreation, l store.Lease, err error) bool {
	id := l.SessionID
	if e.abandonCreation(ctx, pc) {
		if err != nil && !errors.Is(err, errDrainedUnwritten) {
			e.log.Warn("a new session's runner ended before its first write", "session", id, "err", err)
		}
		return false
	}
	if werr := pc.wait(context.WithoutCancel(ctx)); werr != nil {
		e.log.Warn("a new session could not be written", "session", id, "err", werr)
		if d, ok := e.envs.(environment.Discarder); ok {
			gone := func(context.Context) (bool, error) { return true, nil } // no session has it
			if _, derr := d.DiscardCopy(context.WithoutCancel(ctx), id, gone); derr != nil {
				e.log.Warn("remove the workspace of a session that was not written", "session", id, "err", derr)
			}
		}
		return false
	}
	if errors.Is(err, errDrainedUnwritten) {
		e.giveBack(ctx, l)
		return false
	}
	return true
}

// takeCreationAlone writes the runner's pending creation alone, under the
// runner's lease, before the runner does anything else: its first tick has
// to look at the session, or its first append is one a creation cannot carry.
func (r *runner) takeCreationAlone(ctx context.Context) error {
	pc := r.pending
	r.pending = nil
	if pc.take() {
		if err := r.e.writeCreation(ctx, pc, true); err != nil {
			return fmt.Errorf("%w: %w", errCreationFailed, err)
		}
	} else if err := pc.wait(context.WithoutCancel(ctx)); err != nil {
		// The creator's write, which runs to its end.
		return fmt.Errorf("%w: %w", errCreationFailed, err)
	}
	r.lease.ExpiresAt = pc.expires
	return r.leaseFresh(ctx)
}

// leaseFresh makes the lease the session was just created with fresh, if
// its write took a third of its life (freshLease), before the runner goes
// on: else the next claim could take the session over while the runner's
// first call is in flight.
func (r *runner) leaseFresh(ctx context.Context) error {
	if !r.e.freshLease(ctx, r.lease) {
		return fmt.Errorf("%w: the lease the session was created with could not be made fresh", store.ErrLeaseLost)
	}
	return nil
}

// createWith writes the runner's pending creation with p, its first append,
// as one transaction: the session's row as p leaves it, the creation's events
// and then p's, the docs of both (p's version of a doc the creation wrote
// too). It reports false, having written nothing, when p is not one a
// creation can carry (a wake time, a tree's settlement, a lease given back),
// or the creator wrote the creation alone meanwhile: the caller appends p as
// usual, after the creation.
func (r *runner) createWith(ctx context.Context, p *store.EventAppendParams) (bool, error) {
	if p.WakeAt != nil || p.TreeSettle != nil || p.ReleaseLease {
		return false, r.takeCreationAlone(ctx)
	}
	pc := r.pending
	if !pc.take() {
		return false, r.takeCreationAlone(ctx)
	}
	r.pending = nil
	c := *pc.params
	c.Session.Status, c.Session.State, c.Session.Runnable = p.Status, p.State, p.Runnable
	c.Session.UpdatedAt = p.UpdatedAt
	c.Events = append(slices.Clip(c.Events), p.Events...)
	c.Docs = mergeDocs(c.Docs, p.Docs)
	c.Blobs = append(slices.Clip(c.Blobs), p.Blobs...)
	// Leased from now: the lease's life starts with the write.
	now := r.e.clock.Now()
	c.Claim = &store.SessionClaim{Owner: r.e.cfg.NodeID, ExpiresAt: now.Add(r.e.cfg.LeaseTTL)}
	_, err := r.e.store.SessionCreate(context.WithoutCancel(ctx), &c)
	pc.settle(err)
	if err != nil {
		return false, fmt.Errorf("%w: %w", errCreationFailed, err)
	}
	r.lease.ExpiresAt = c.Claim.ExpiresAt
	return true, r.leaseFresh(ctx)
}

// mergeDocs returns the docs of a and then b, a doc of a that b writes too
// left out (b's is the later version, with a's creation time).
func mergeDocs(a, b []store.DocWrite) []store.DocWrite {
	if len(b) == 0 {
		return a
	}
	out := make([]store.DocWrite, 0, len(a)+len(b))
	created := make(map[store.DocKind]map[string]time.Time)
	for _, d := range a {
		if !slices.ContainsFunc(b, func(n store.DocWrite) bool { return n.Kind == d.Kind && n.ID == d.ID }) {
			out = append(out, d)
			continue
		}
		if created[d.Kind] == nil {
			created[d.Kind] = make(map[string]time.Time)
		}
		created[d.Kind][d.ID] = d.CreatedAt
	}
	for _, d := range b {
		if at, ok := created[d.Kind][d.ID]; ok {
			d.CreatedAt = at // as an upsert of the row the creation wrote keeps it
		}
		out = append(out, d)
	}
	return out
}
