package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Snapshot limits: a workspace larger than this is checkpointed without a
// snapshot (the checkpoint says why).
const (
	maxSnapshotFileBytes  = 256 << 20
	maxSnapshotTotalBytes = 2 << 30
)

// snapshotLimits bound every snapshot of a workspace, as its Environment
// takes them.
var snapshotLimits = environment.SnapshotLimits{MaxFileBytes: maxSnapshotFileBytes, MaxTotalBytes: maxSnapshotTotalBytes}

// emptySnapshotID is the id of a snapshot of an empty workspace under
// snapshotLimits (whose excludes, none, cannot be refused).
var emptySnapshotID, _ = snapshot.EmptyID(snapshot.Options{Exclude: snapshotLimits.Exclude})

// checkpoint snapshots the workspace (content-addressed: unchanged files
// cost nothing) and journals checkpoint.created at the current position.
// Its id is derived from the session and that position, so a worker that
// resumes after a crash derives the same one.
func (r *runner) checkpoint(ctx context.Context, kind, name, summary, next string, turnID string, step int) (*lt.Checkpoint, error) {
	if err := r.ensureWorkspace(ctx); err != nil {
		return nil, err
	}
	sid := r.st.Session.ID
	seq := r.st.Session.LastEventSeq + 1
	c := lt.Checkpoint{
		ID: checkpointID(sid, seq), SessionID: sid, TurnID: turnID, Step: step, Kind: kind, Name: name,
		Summary: summary, NextAction: next, EventSeq: seq, Artifacts: r.artifactIDs(), CreatedAt: r.e.clock.Now(),
	}
	// Incremental, and noted as what the copy holds, by the Environment
	// (snapshotwrites.go).
	id, stats, err := r.snapshot(ctx)
	switch {
	case err == nil:
		c.Snapshot, c.Files, c.Bytes = id, stats.Files, stats.Bytes
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case envLost(err) != err:
		// Not a checkpoint without its snapshot: the environment is
		// opened again and the step's checkpoint taken from the journal.
		return nil, fmt.Errorf("snapshot: %w", envLost(err))
	case store.IsStorageFull(err):
		// Not a checkpoint without its snapshot: the step waits for space
		// and is taken again from the journal (see runSession).
		return nil, fmt.Errorf("snapshot the workspace: %w", err)
	case errors.Is(err, fs.ErrNotExist):
		c.SnapshotError = "the workspace does not exist"
	default:
		c.SnapshotError = clip(err.Error(), 300)
	}
	if err := r.add(lt.EventCheckpointCreated, turnID, step, lt.CheckpointCreatedData{Checkpoint: c}); err != nil {
		return nil, err
	}
	return &c, nil
}

// ensureWorkspace brings a lost or stale workspace back before a
// checkpoint: a checkpoint of a vanished workspace would make the loss
// permanent.
func (r *runner) ensureWorkspace(ctx context.Context) error {
	lost, err := r.workspaceLost(ctx)
	switch {
	case err != nil:
		return err
	case lost && r.st.CurrentTurn() != nil:
		if r.tickSeq < 0 {
			// A tick that took no look (onlyCheckpointDue): a restore
			// runs the step's idempotent calls again, which act outside
			// the journal, so a pause or a cancel asked for meanwhile
			// comes first (a cancel an in-doubt call holds does not).
			if err := r.readControls(ctx); err != nil {
				return err
			}
			if r.st.Pause != nil || r.st.Cancel != nil && !r.st.CancelHeld() {
				return errControlFirst
			}
		}
		return r.restoreWorkspace(ctx)
	case lost:
		// No turn to tell: brought up to date quietly, since the
		// snapshot stands for the people's changes too (workspacesync.go).
		return r.syncWorkspace(ctx)
	}
	return nil
}

// errControlFirst ends a tick that found a pause or a cancel before a
// restore it was about to make: the next tick, which looks first, parks
// the session or cancels its turns.
var errControlFirst = errors.New("a pause or a cancel was asked for before the workspace's restore")

// snapshot takes a snapshot of the session's workspace through its
// Environment.
func (r *runner) snapshot(ctx context.Context) (string, snapshot.Stats, error) {
	if r.env == nil || r.env.env == nil {
		return "", snapshot.Stats{}, errors.New("the session's environment is not open")
	}
	return r.env.env.Snapshot(ctx)
}

// artifactIDs lists the latest version of each artifact the session has
// delivered (the ids runFinish derived).
func (r *runner) artifactIDs() []string {
	names := make([]string, 0, len(r.st.ArtifactIDs))
	for n := range r.st.ArtifactIDs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, r.st.ArtifactIDs[n])
	}
	return out
}

type checkpointArgs struct {
	Name       string `json:"name"`
	Summary    string `json:"summary,omitempty"`
	NextAction string `json:"next_action,omitempty"`
}

// runCheckpoint is the agent's checkpoint tool: a named checkpoint.
func (r *runner) runCheckpoint(ctx context.Context, c *journal.Call) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	var args checkpointArgs
	_ = json.Unmarshal(c.Arguments, &args) // validated against checkpointSchema when requested
	ck, err := r.checkpoint(ctx, lt.CheckpointNamed, args.Name, args.Summary, args.NextAction, turnID, step)
	if err != nil {
		return err
	}
	out, err := json.Marshal(map[string]any{"checkpoint_id": ck.ID, "files": ck.Files, "bytes": ck.Bytes, "snapshot_error": ck.SnapshotError})
	if err != nil {
		return err
	}
	return r.add(lt.EventToolCompleted, turnID, step, lt.ToolCompletedData{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Output: out})
}

// workspaceLost reports whether the session's workspace is gone although
// the session already worked in it (a deleted directory, or a session that
// moved to a node without it), or whether this node's copy is stale: another
// node changed the workspace since, or it does not contain the session's
// last snapshot. A session that never ran a tool simply gets a new one.
func (r *runner) workspaceLost(ctx context.Context) (bool, error) {
	if r.st.EnvironmentStopped {
		return true, nil // stopped while idle: recreated (idlestop.go), not lost
	}
	if r.provisioned {
		// Opened anew: gone, unless there was nothing to lose.
		if r.st.WorkspaceSnapshot() == "" && len(r.st.PersonChanges) == 0 {
			r.provisioned = false
			return false, nil
		}
		return true, nil
	}
	if r.wsWriter != "" && r.wsWriter != r.e.cfg.NodeID && r.st.Workspace == "" && r.envRunner == "" {
		// Another node ran a tool that changes the workspace since this
		// copy was last used (sub-agents, sharing their root's workspace,
		// leave that to the snapshots below; so does a workspace on a
		// runner, which every node reaches the same).
		return true, nil
	}
	// It must hold the last snapshot and the people's changes since
	// (workspacesync.go), as its Environment knows.
	ok, err := r.holdsLatest(ctx)
	return !ok, err
}

// restoreWorkspace brings the workspace back to where the journal says it
// is: lost (gone, or a node that never had it) or stale (this node's copy
// predates the session's last snapshot), it is restored from that
// snapshot, and the calls of the current step made after the snapshot that
// may run again (idempotent ones, with their keys) run again. It journals
// environment.lost and environment.restored, and tells the model (with the
// next tool result) what, if anything, is missing.
func (r *runner) restoreWorkspace(ctx context.Context) error {
	if r.st.EnvironmentStopped {
		return r.recreateEnvironment(ctx)
	}
	return r.restoreLost(ctx)
}

// restoreLost is restoreWorkspace for a workspace lost or stale.
func (r *runner) restoreLost(ctx context.Context) error {
	turnID, step := r.st.CurrentTurn().ID, 0
	if r.st.Step != nil {
		step = r.st.Step.N
	}
	if r.env == nil || r.env.env == nil {
		return errors.New("restore workspace: the session's environment is not open")
	}
	// The stop's snapshot when an idle stop took one since the last
	// checkpoint (its outcome unknown: the workspace went away with it).
	snap := r.st.WorkspaceSnapshot()
	if err := r.checkRestoreBounds(ctx, snap, step); err != nil {
		return err
	}
	reason := "the workspace directory is gone"
	stale := !r.provisioned
	r.provisioned = false
	if stale {
		// Found by workspaceLost: another node wrote it since, or the
		// copy (this node's, or a runner's) does not hold the session's
		// last snapshot and the people's changes since, as it said.
		reason = "the workspace does not hold what the journal says it does (the session's last snapshot, and the people's changes since): another node changed it since, or the environment did not keep it"
	}
	if n := r.st.UnrestoredLosses; n > 0 && snap != "" {
		reason = fmt.Sprintf("the environment does not hold the workspace after the last restore of it (restore %d of at most %d)", n+1, maxRestoreAttempts)
	}
	if err := r.add(lt.EventEnvironmentLost, turnID, step, lt.EnvironmentLostData{Reason: reason}); err != nil {
		return err
	}
	if stale && snap == "" {
		// Nothing to converge on: start from an empty workspace.
		empty, err := r.e.emptySnapshot(ctx, r.project)
		if err == nil {
			_, err = r.env.env.Restore(ctx, empty)
		}
		if err != nil {
			return fmt.Errorf("empty the stale workspace: %w", envLost(err))
		}
	}
	if snap == "" {
		d := lt.EnvironmentRestoredData{}
		d.Replayed, d.Missing = r.replayStep(ctx)
		d.Note = "The workspace was lost and recreated empty: no checkpoint had a snapshot of it"
		switch {
		case len(d.Missing) > 0:
			d.Note += r.replayedNote(d.Replayed) + ". The changes these calls made could not be brought back: " + r.callLabels(d.Missing) + ". Check before you go on."
		case len(d.Replayed) > 0:
			d.Note += r.replayedNote(d.Replayed) + "; it is as your calls left it."
		default:
			d.Note += ". Files you made before are gone."
		}
		d.Note += r.reapplyPersonChanges(ctx)
		return r.add(lt.EventEnvironmentRestored, turnID, step, d)
	}
	d := lt.EnvironmentRestoredData{}
	// Noted as what the copy holds by the Environment.
	stats, err := r.env.env.Restore(ctx, snap)
	if err != nil {
		return fmt.Errorf("restore workspace from snapshot %s: %w", snap, envLost(err))
	}
	if err := r.checkRestored(ctx, snap); err != nil {
		return err
	}
	if snap == r.st.EnvironmentSnapshot && !r.st.EnvironmentSnapshotPassed {
		// Taken by an idle stop while the session was parked, nothing
		// written since: the workspace is back as the session left it.
		d, err := r.restoredAsLeft(ctx, snap, stats)
		if err != nil {
			return err
		}
		return r.add(lt.EventEnvironmentRestored, turnID, step, d)
	}
	d.Snapshot, d.Files, d.Bytes = snap, stats.Files, stats.Bytes
	d.CheckpointID = r.st.LastSnapshotCheckpoint
	d.Replayed, d.Missing = r.replayStep(ctx)
	switch {
	case len(d.Missing) > 0:
		d.Note = fmt.Sprintf("The workspace was restored from checkpoint %s (%d files)%s. The changes these calls of the current step made to it could not be brought back: %s. Check them before you go on.",
			d.CheckpointID, stats.Files, r.replayedNote(d.Replayed), r.callLabels(d.Missing))
	default:
		d.Note = fmt.Sprintf("The workspace was restored from checkpoint %s (%d files)%s; it is as your calls left it.", d.CheckpointID, stats.Files, r.replayedNote(d.Replayed))
	}
	d.Note += r.reapplyPersonChanges(ctx)
	return r.add(lt.EventEnvironmentRestored, turnID, step, d)
}

// endsATurn reports whether evs end a turn.
func endsATurn(evs []lt.Event) bool {
	for _, ev := range evs {
		if ev.Type == lt.EventTurnCompleted {
			return true
		}
	}
	return false
}

// maxRestoreAttempts bounds the restores of a lost workspace in a row
// (journal.State.UnrestoredLosses) that end without the environment
// holding the snapshot: past it the turn fails with sandbox_error.
const maxRestoreAttempts = 3

// restoreFailedError ends a turn whose workspace could not be restored:
// maxRestoreAttempts restores of snapshot ended without the environment
// (on runner, when not this node's) holding it.
type restoreFailedError struct {
	runner, snapshot string
	attempts         int
	// window, when set, says the restores did bring the workspace back,
	// but it was lost again and again: attempts losses within window
	// steps (lossBound).
	window int
}

func (e *restoreFailedError) Error() string {
	where := "this node"
	if e.runner != "" {
		where = fmt.Sprintf("runner %q", e.runner)
	}
	if e.window > 0 {
		return fmt.Sprintf("the session's workspace keeps being lost on %s: %d losses within %d steps, each restored, so it is not trusted with the session's work",
			where, e.attempts, e.window)
	}
	return fmt.Sprintf("the session's workspace could not be brought back on %s: %d restores of snapshot %s in a row ended without the environment holding it, so it is not trusted with the session's work",
		where, e.attempts, e.snapshot)
}

// checkRestored checks that the environment holds snap after restoring
// it. A restore's success is the environment's word only: a runner that
// "restores" by doing nothing and then says it does not hold the
// snapshot would have the session restore at every call, without end.
// One that does not hold it is treated as an environment lost: the
// environment.lost that began the restore is made durable (it counts
// towards maxRestoreAttempts, across claims and reconnections) and the
// session's runner starts over with it opened again, after a backoff, as
// after a runner lost mid-call.
func (r *runner) checkRestored(ctx context.Context, snap string) error {
	held, err := r.env.env.Holds(ctx, snap)
	if err != nil {
		return fmt.Errorf("check the restore of snapshot %s: %w", snap, envLost(err))
	}
	if held {
		return nil
	}
	return r.restoreUnheld(ctx, snap)
}

// restoreUnheld ends a runner whose environment does not hold snap after
// restoring it, once the environment.lost that counts it is journaled
// (checkRestored).
func (r *runner) restoreUnheld(ctx context.Context, snap string) error {
	r.e.log.Warn("the environment does not hold the snapshot it restored", "session", r.st.Session.ID, "runner", r.envRunner, "snapshot", snap)
	if !endsATurn(r.b.events) {
		if err := r.flush(ctx, false); err != nil {
			return err
		}
	}
	// else the restore came after turn.completed (completeTurn restores
	// first, so only an environment that answered that it holds the
	// snapshot, then that it does not): flushing would make the end of
	// the turn durable without its checkpoint, so nothing is, and the
	// runner starts over from the journal.
	return fmt.Errorf("%w: %w", errEnvironmentLost, &restoreFailedError{runner: r.envRunner, snapshot: snap, attempts: r.st.UnrestoredLosses})
}

// reapplyPersonChanges applies again, after a restore (and the replay of
// the step's calls, which came before them), the changes people made since
// the snapshot, and says so for the model.
func (r *runner) reapplyPersonChanges(ctx context.Context) string {
	changes := r.st.ChangesToApply()
	if len(changes) == 0 {
		return ""
	}
	pending := len(r.st.PersonChanges)
	failed, err := r.applyPersonChanges(ctx, restoredChanges(changes))
	if err != nil {
		failed = append(failed, "the environment went away (the backend's error is not shown)")
	}
	// Those journaled as not applied (a conflict) left the list: the
	// model is told of them with the people's changes.
	notApplied := pending - len(r.st.PersonChanges)
	note := fmt.Sprintf(" The %d change(s) a person made to the workspace since were applied again.", len(changes)-len(failed)-notApplied)
	if len(failed) > 0 {
		note += " These could not be: " + strings.Join(failed, "; ") + "."
	}
	return note
}

// restoredChanges are changes as applied again onto a restored workspace:
// without their basis. The workspace holds the snapshot and nothing since
// (no program's write to keep); a change applied before the restore was
// based on the live file then, which the restore took away, and compared
// with the snapshot's content it would be judged a conflict and the
// person's change dropped. A change never applied was based on the
// snapshot view, which is what the workspace holds now.
func restoredChanges(changes []journal.PersonChange) []journal.PersonChange {
	out := slices.Clone(changes)
	for i := range out {
		out[i].BasedOn = ""
	}
	return out
}

func (r *runner) replayedNote(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ", and the idempotent calls of the current step made since were run again (" + r.callLabels(ids) + ")"
}

// callLabels names calls for the model: "shell (call_2_1)".
func (r *runner) callLabels(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id
		if r.st.Step != nil {
			if c := r.st.CallByID(r.st.Step.N, id); c != nil {
				out[i] = fmt.Sprintf("%s (%s)", c.Tool, id)
			}
		}
	}
	return strings.Join(out, ", ")
}

// replayStep runs again, after a restore, the calls of the current step
// that completed after the restored snapshot and may run again: idempotent
// built-ins, with the same arguments and idempotency key (that is what the
// class promises). It returns the ids of those it ran and of those whose
// changes could not be brought back. The step's own checkpoint, once
// taken, covers its calls: nothing is replayed then.
func (r *runner) replayStep(ctx context.Context) (replayed, missing []string) {
	st := r.st.Step
	if st == nil || r.st.CheckpointStep == st.N {
		return nil, nil
	}
	for i := range st.Calls {
		c := &st.Calls[i]
		if c.Kind != lt.CallBuiltin || c.Status != journal.CallDone || c.Failed || c.Class == lt.EffectRead {
			continue
		}
		label := c.ID
		t, ok := r.tools.builtin(c.Tool)
		if c.Class != lt.EffectIdempotent || !ok {
			missing = append(missing, label)
			continue
		}
		call := &tool.Call{
			SessionID: r.st.Session.ID, Workspace: r.ws, Arguments: c.Arguments, IdempotencyKey: c.IdempotencyKey,
			Timeout: r.tools.timeout(c.Tool), Effect: c.Class,
		}
		r.env.attach(call, false)
		// Cut by a cancel or the turn's deadline as the call itself
		// would be: a replay may run as long as the call did.
		callCtx, release := r.callContext(ctx, true)
		res, err := r.runTool(callCtx, t, call)
		release()
		if err != nil || res == nil || res.Error != "" {
			missing = append(missing, label)
			continue
		}
		replayed = append(replayed, label)
	}
	return replayed, missing
}

const checkpointSchema = `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":200,"description":"A short name for this point of the work"},"summary":{"type":"string","description":"What exists now"},"next_action":{"type":"string","description":"What comes next, where a retry restarts"}},"required":["name"],"additionalProperties":false}`
