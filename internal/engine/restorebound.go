package engine

import "context"

// Bounds on a workspace lost again and again. maxRestoreAttempts counts
// the restores in a row that end without the environment holding the
// snapshot; these count the losses themselves, restored or not: a runner
// that holds the snapshot right after each restore (so passes
// checkRestored) but loses the workspace at the next call would otherwise
// have the session lose and restore for ever, each restore shipping the
// whole snapshot (a cost that grows with the square of the turn's steps).
// The losses are counted from the journal (journal.State.TurnLossSteps),
// so no claim, crash or reconnection starts the count over; a new turn
// does. A runner that crashes now and then (losses
// lossWindowSteps/maxLossesPerWindow or more steps apart) is always
// restored.
const (
	maxLossesPerWindow = 4
	lossWindowSteps    = 20
)

// lossesInWindow returns how many of the current turn's losses came
// within the lossWindowSteps steps that end at step.
func (r *runner) lossesInWindow(step int) int {
	n := 0
	for _, s := range r.st.TurnLossSteps {
		if s > step-lossWindowSteps {
			n++
		}
	}
	return n
}

// checkRestoreBounds refuses a restore of the workspace (to snap, "" for
// none) at step past either bound: the turn then fails with sandbox_error
// naming the runner (runSession), rather than loop.
func (r *runner) checkRestoreBounds(ctx context.Context, snap string, step int) error {
	if n := r.st.UnrestoredLosses; n >= maxRestoreAttempts && snap != "" {
		// Restored again and again without the environment holding the
		// snapshot after.
		return &restoreFailedError{runner: r.envRunner, snapshot: snap, attempts: n}
	}
	if r.st.CurrentTurn() == nil {
		// The losses counted are a turn's: the last turn's are not held
		// against a recreate between turns.
		return nil
	}
	if n := r.lossesInWindow(step); n >= maxLossesPerWindow {
		// The losses and restores of this claim are made durable first:
		// the journal shows why the turn failed.
		if !endsATurn(r.b.events) {
			if err := r.flush(ctx, false); err != nil {
				return err
			}
		}
		return &restoreFailedError{runner: r.envRunner, snapshot: snap, attempts: n, window: lossWindowSteps}
	}
	return nil
}
