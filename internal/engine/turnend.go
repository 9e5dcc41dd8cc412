package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// endTurn ends the turn whose final answer this tick found. When the
// tick's look at the session (readControls) saw no other writer, the
// answer is made durable with the end of the turn in one append; else it
// was made durable first and the session read again (readSteers), and the
// append carries the end alone. The lease is given back with it when the
// next tick would only park. A person's message is still never left
// unread, nor a cancel left without effect: like every append of the
// runner, that one holds only if the journal still ends where the runner
// last read it, so a steer (or a cancel, a pause, a follow-up turn) that
// lands after the look or the read makes it fail. Then the end of the
// turn is dropped, the answer's events (if not durable yet) are merged
// onto the newer journal (the model's answer is kept, never asked for
// again), and the next tick decides again: the model reads the message
// before the turn may end, and a cancel ends it cancelled. It reports
// whether the runner is done with the session.
func (r *runner) endTurn(ctx context.Context, answer string, verdict *lt.AcceptanceVerdict) (bool, error) {
	b, events, blobs := r.b, len(r.b.events), len(r.b.blobs)
	if err := r.completeTurn(ctx, answer, verdict); err != nil {
		if r.b != b {
			// Flushed meanwhile (a restore's journaling): the answer
			// is durable already, and the batch is no longer the one
			// events and blobs count.
			return false, err
		}
		// The turn's checkpoint failed (its environment went away, the
		// disk is full): the runner starts over from the journal, which
		// keeps the model's answer all the same, as when the answer was
		// made durable before the end of the turn was built.
		if ctx.Err() == nil {
			kerr := r.dropEnd(ctx, events, blobs)
			if kerr == nil {
				kerr = r.flush(ctx, false)
			}
			if kerr != nil {
				r.e.log.Warn("keep the final answer of a turn whose end failed", "session", r.lease.SessionID, "err", kerr)
			}
		}
		return false, err
	}
	if r.b != b {
		// A restore before the turn's end journaled (flushed) the
		// answer with it: what is pending now is only what came after.
		events, blobs = 0, 0
	}
	release := r.parksNext()
	err := r.appendBatch(ctx, release)
	switch {
	case err == nil:
		return r.released, nil
	case !errors.Is(err, store.ErrConflict):
		return false, fmt.Errorf("append: %w", err)
	case !onlyTurnEnd(r.b.events[events:]):
		// The turn's checkpoint found the workspace lost and restored it
		// first: what that journaled stays, so the whole batch is merged
		// as any flush merges it (which refuses the end of the turn if
		// the model has a message to read, and the runner starts over).
		if err := r.merge(ctx); err != nil {
			return false, err
		}
		return false, r.flush(ctx, false)
	}
	return false, r.dropEnd(ctx, events, blobs)
}

// dropEnd takes the end of the turn out of the pending batch, keeping its
// first events and blobs (the answer's): the session's state is read again
// and they are applied on it, as a merge does.
func (r *runner) dropEnd(ctx context.Context, events, blobs int) error {
	r.b.events, r.b.blobs = r.b.events[:events], r.b.blobs[:blobs]
	return r.merge(ctx)
}

// onlyTurnEnd reports whether evs are only what completeTurn journals:
// none of them is read by what the runner derives from the journal (its
// transcript, MCP listings, effect history), so dropping them unsaved
// leaves nothing to derive again.
func onlyTurnEnd(evs []lt.Event) bool {
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventTurnCompleted, lt.EventCheckpointCreated, lt.EventSessionStatusChanged:
		default:
			return false
		}
	}
	return true
}

// parksNext reports whether the next tick would do nothing but park the
// session (tick's order): no turn left, no idle stop due, no orphaned
// sub-agent to cancel, no report owed to a parent.
func (r *runner) parksNext() bool {
	st := r.st
	return st.CurrentTurn() == nil && !r.idleStopDue() && len(st.OrphanedChildren()) == 0 &&
		(st.ReportDue == nil || st.Session.ParentID == nil)
}
