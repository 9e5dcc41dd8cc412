package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Idle stop and recreate (environment.idle_stop_seconds, issue 20 item 5;
// docs/dev/environments.md, "Idle stop and recreate").
//
// A parked session holds no worker and no goroutine, so nothing waits for
// its idle time to pass: the time is part of its row's wake condition
// (wakeAt, from journal.State.IdleStopAt), and the scheduler claims it then
// as it claims a session whose timer fired. That claim stops the
// environment (stopIdle) and parks the session again. The next claim that
// has a turn to run opens the environment anew and restores it
// (recreateEnvironment) before the session goes on.

// wakeAt is when a parked session's row must be claimed again: its own
// wake time (timers, expiries, deadlines) or its environment's idle stop,
// whichever comes first.
func wakeAt(st *journal.State) *time.Time {
	at, stop := st.WakeAt(), st.IdleStopAt()
	if at == nil || (stop != nil && stop.Before(*at)) {
		return stop
	}
	return at
}

// idleStopDue reports whether this claim is the idle stop's: the session's
// environment is due to stop and nothing else is due.
func (r *runner) idleStopDue() bool {
	now := r.e.clock.Now()
	stop := r.st.IdleStopAt()
	if stop == nil || stop.After(now) {
		return false
	}
	other := r.st.WakeAt()
	return other == nil || other.After(now)
}

// stopIdle stops the environment of a session parked for
// idle_stop_seconds, journals environment.stopped (or, refused,
// environment.stop_failed, which postpones the next try: see
// journal.State.IdleStopAt) and parks the session again.
func (r *runner) stopIdle(ctx context.Context) (bool, error) {
	turnID, step := "", 0
	if t := r.st.CurrentTurn(); t != nil {
		turnID = t.ID
		if r.st.Step != nil {
			step = r.st.Step.N
		}
	}
	var elsewhere *environment.ElsewhereError
	if errors.As(r.envErr, &elsewhere) {
		// The runner's connection is on another node: only that node can
		// stop it, so the session goes there (nothing was refused).
		r.envErr = nil
		return r.handOver(ctx, elsewhere)
	}
	runner := r.envRunner
	snap, err := r.stopEnvironment(ctx, turnID, step)
	if errors.Is(err, errStopOvertaken) {
		// An API write made the session runnable while the stop's
		// snapshot was being journaled: its environment is kept.
		return false, nil
	}
	// Stopped or not, this claim is done with it (its programs ended):
	// a tick that needs it again (an API write made the session runnable
	// meanwhile) opens it again.
	r.env.close()
	r.env, r.envDeferred = nil, true
	switch {
	case err == nil:
		err = r.add(lt.EventEnvironmentStopped, turnID, step, lt.EnvironmentStoppedData{Reason: "idle", Snapshot: snap, Runner: runner})
	case ctx.Err() != nil:
		return false, context.Cause(ctx)
	case store.IsStorageFull(err):
		return false, err // the session waits for space (runSession)
	default:
		r.e.log.Warn("idle stop of the session's environment refused", "session", r.st.Session.ID, "err", err)
		err = r.add(lt.EventEnvironmentStopFailed, turnID, step, lt.EnvironmentStopFailedData{Reason: "idle", Error: stopFailure(err)})
	}
	if err != nil {
		return false, err
	}
	return r.park(ctx)
}

// errStopOvertaken: the session became runnable while its idle stop was
// under way (found when the stop's snapshot was made durable); nothing was
// stopped.
var errStopOvertaken = errors.New("the session became runnable during its idle stop")

// stopEnvironment snapshots the session's environment and stops it at that
// snapshot, so nothing it holds is lost whatever the step wrote since the
// last checkpoint (its programs end first: an MCP server or a background
// program is started again when needed). The snapshot is journaled
// (environment.stopping) and made durable before the stop: a stop whose
// outcome never comes back (the runner's connection broke after it
// removed the workspace) leaves the journal naming it, and the copy made
// anew is restored from it. It returns the snapshot the recreated
// environment is to be restored from: "" when this copy was not the
// journal's (made anew, or stale), so that the next call restores the
// journal's as for a lost workspace, and tells the model.
func (r *runner) stopEnvironment(ctx context.Context, turnID string, step int) (string, error) {
	if err := r.envErr; err != nil {
		r.envErr = nil
		return "", err
	}
	if r.env == nil || r.env.env == nil {
		return "", errors.New("the session's environment is not open")
	}
	trusted, err := r.copyIsTheJournals(ctx)
	if err != nil {
		return "", err
	}
	var through int64
	if trusted {
		// Asked before the snapshot is taken: a change applied between
		// the two is then applied again after the recreate (the same
		// bytes), never taken as held when it is not.
		if through, err = r.changesHeldThrough(ctx); err != nil {
			return "", err
		}
	}
	if r.env.mcp != nil {
		// Its servers are programs of the environment: they end with it.
		r.env.mcp.Close()
		r.env.mcp = nil
	}
	id, _, err := r.env.env.Snapshot(ctx)
	if err != nil {
		return "", err
	}
	keep := ""
	switch {
	case trusted:
		keep = id
	case r.st.EnvironmentSnapshot != "" && !r.st.EnvironmentSnapshotPassed:
		// An earlier stop's snapshot is journaled (that stop's reply was
		// lost after the workspace was removed) and nothing was written
		// since: the session's workspace is still that snapshot, on the
		// server, whatever this copy is. Made anew at this claim or
		// before it (the runner restarted, something opened it in
		// between), it is not the journal's and must not replace it.
		keep = r.st.EnvironmentSnapshot
	}
	if keep != "" && keep != r.st.EnvironmentSnapshot {
		if err := r.add(lt.EventEnvironmentStopping, turnID, step, lt.EnvironmentStoppingData{Reason: "idle", Snapshot: keep, Runner: r.envRunner, PersonChangesThrough: through}); err != nil {
			return "", err
		}
		if err := r.flush(ctx, false); err != nil {
			return "", err
		}
		if r.st.Runnable() {
			// An API write merged by the flush (a decision, a resume).
			return "", errStopOvertaken
		}
	}
	err = r.env.env.Stop(ctx, id)
	if errors.Is(err, environment.ErrBusy) {
		// A person's read or change holding the environment open (a
		// short request) is waited for, and the stop tried again, rather
		// than counted as refused and put off by the idle time. It is
		// tried again too when no request holds it by now: one may have
		// ended between the refusal and this wait.
		wctx, cancel := context.WithTimeout(ctx, personOpenWait)
		ended := r.e.personOpens.wait(wctx, r.st.WorkspaceID())
		cancel()
		if ended {
			err = r.env.env.Stop(ctx, id)
		}
	}
	if err != nil {
		return "", err
	}
	return keep, nil
}

// copyIsTheJournals reports whether the environment's workspace is the one
// the journal's calls left: not made anew at this claim (unless there was
// nothing to lose), not stale, and known to hold the snapshot the journal
// says it is at. A person's changes not yet applied to it do not count:
// they stay in the journal (State.PersonChanges) and are applied again
// after the recreate.
func (r *runner) copyIsTheJournals(ctx context.Context) (bool, error) {
	snap := r.st.WorkspaceSnapshot()
	if r.provisioned {
		return snap == "" && len(r.st.PersonChanges) == 0, nil
	}
	if r.wsWriter != "" && r.wsWriter != r.e.cfg.NodeID && r.st.Workspace == "" && r.envRunner == "" {
		return false, nil // another node's copy is the current one (workspaceLost)
	}
	if snap == "" {
		return true, nil
	}
	return r.env.env.Holds(ctx, snap)
}

// changesHeldThrough returns the seq of the last person's change the
// environment's workspace holds, which a workspace known to hold the
// journal's snapshot (copyIsTheJournals) does: the last of those that
// snapshot lacks whose marker it holds (applied to it, Record), else the
// last that snapshot holds.
func (r *runner) changesHeldThrough(ctx context.Context) (int64, error) {
	changes := r.st.ChangesToApply()
	for i := len(changes) - 1; i >= 0; i-- {
		held, err := r.env.env.Holds(ctx, changeMarker(changes[i].Seq))
		if err != nil {
			return 0, err
		}
		if held {
			return changes[i].Seq, nil
		}
	}
	if r.st.EnvironmentSnapshot == "" {
		return 0, nil // a checkpoint's snapshot: it holds none of them
	}
	return r.st.EnvironmentSnapshotChanges, nil
}

// stopFailure says why an idle stop was refused, for the journal: the
// seam's errors by their meaning, no other text (a backend's message may
// name a host path).
func stopFailure(err error) string {
	switch {
	case errors.Is(err, environment.ErrFull):
		return "the session's runner is at its capacity"
	case errors.Is(err, environment.ErrUnavailable):
		return "the session's runner is not connected"
	case errors.Is(err, environment.ErrBusy):
		return "the environment is busy (a call in flight, or another session has its workspace open)"
	case errors.Is(err, environment.ErrChanged):
		return "the workspace changed while it was being stopped"
	case errors.Is(err, environment.ErrLost), errors.Is(err, environment.ErrClosed):
		return "the environment went away while it was being stopped"
	default:
		return "the environment could not be stopped"
	}
}

// recreateEnvironment brings back the workspace of an environment stopped
// while the session was parked: environment.provisioned, then the
// workspace restored from the snapshot it was stopped at and the people's
// changes since applied again (environment.restored). Nothing was lost, so
// the model is told nothing, unless a person's change could not be
// applied. A copy that was not the journal's when it stopped (no
// snapshot) is restored as a lost workspace is, and the model is told.
func (r *runner) recreateEnvironment(ctx context.Context) error {
	if r.env == nil || r.env.env == nil {
		return errors.New("recreate the environment: it is not open")
	}
	turnID, step := "", 0
	if t := r.st.CurrentTurn(); t != nil {
		turnID = t.ID
		if r.st.Step != nil {
			step = r.st.Step.N
		}
	}
	if err := r.add(lt.EventEnvironmentProvisioned, turnID, step, lt.EnvironmentProvisionedData{Runner: r.envRunner}); err != nil {
		return err
	}
	snap := r.st.EnvironmentSnapshot
	if snap == "" {
		r.provisioned = true // restored as a vanished workspace, with the note
		if turnID == "" {
			if err := r.checkRestoreBounds(ctx, r.st.LastSnapshot, step); err != nil {
				return err
			}
			if err := r.syncWorkspace(ctx); err != nil {
				return err
			}
			if err := r.checkRecreated(ctx, turnID, step, r.st.LastSnapshot); err != nil {
				return err
			}
			return r.add(lt.EventEnvironmentRestored, turnID, step, lt.EnvironmentRestoredData{Snapshot: r.st.LastSnapshot, CheckpointID: r.st.LastSnapshotCheckpoint})
		}
		return r.restoreLost(ctx)
	}
	// A recreate is a restore like the others: bounded and checked the
	// same way, or a runner that holds nothing after it would have the
	// session recreate it at every claim.
	if err := r.checkRestoreBounds(ctx, snap, step); err != nil {
		return err
	}
	stats, err := r.env.env.Restore(ctx, snap)
	if err != nil {
		return fmt.Errorf("restore workspace from snapshot %s: %w", snap, envLost(err))
	}
	if err := r.checkRecreated(ctx, turnID, step, snap); err != nil {
		return err
	}
	r.provisioned = false
	d, err := r.restoredAsLeft(ctx, snap, stats)
	if err != nil {
		return err
	}
	return r.add(lt.EventEnvironmentRestored, turnID, step, d)
}

// checkRecreated checks that the environment holds snap ("" for none to
// check) once recreated from it, as checkRestored does after the restore
// of a lost workspace: one that does not is counted as a loss (the next
// recreate is refused past checkRestoreBounds) and opened again, as after
// a loss.
func (r *runner) checkRecreated(ctx context.Context, turnID string, step int, snap string) error {
	if snap == "" {
		return nil
	}
	held, err := r.env.env.Holds(ctx, snap)
	if err != nil {
		return fmt.Errorf("check the restore of snapshot %s: %w", snap, envLost(err))
	}
	if held {
		return nil
	}
	if err := r.add(lt.EventEnvironmentLost, turnID, step, lt.EnvironmentLostData{Reason: "the environment does not hold the snapshot it was recreated from, after restoring it"}); err != nil {
		return err
	}
	return r.restoreUnheld(ctx, snap)
}

// restoredAsLeft applies the people's changes again to a workspace just
// restored from snap, the snapshot an idle stop took, and returns what
// environment.restored says: nothing for the model unless a change could
// not be applied.
func (r *runner) restoredAsLeft(ctx context.Context, snap string, stats snapshot.Stats) (lt.EnvironmentRestoredData, error) {
	d := lt.EnvironmentRestoredData{Snapshot: snap, Files: stats.Files, Bytes: stats.Bytes}
	if snap == r.st.LastSnapshot {
		d.CheckpointID = r.st.LastSnapshotCheckpoint
	}
	failed, err := r.applyPersonChanges(ctx, r.st.ChangesToApply())
	if err != nil {
		return d, err
	}
	if len(failed) > 0 {
		d.Note = "The workspace was recreated as you left it, but these changes a person made to it since could not be applied: " + strings.Join(failed, "; ") + "."
	}
	return d, nil
}
