package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Snapshot limits: a workspace larger than this is checkpointed without a
// snapshot (the checkpoint says why).
const (
	maxSnapshotFileBytes  = 256 << 20
	maxSnapshotTotalBytes = 2 << 30
)

// checkpoint snapshots the workspace (content-addressed: unchanged files
// cost nothing) and journals checkpoint.created at the current position.
// Its id is derived from the session and that position, so a worker that
// resumes after a crash derives the same one.
func (r *runner) checkpoint(ctx context.Context, kind, name, summary, next string, turnID string, step int) (*lt.Checkpoint, error) {
	if lost, err := r.workspaceLost(); err != nil {
		return nil, err
	} else if lost && r.st.CurrentTurn() != nil {
		// Restore first: a checkpoint of a vanished workspace would make
		// the loss permanent.
		if err := r.restoreWorkspace(ctx); err != nil {
			return nil, err
		}
	}
	sid := r.st.Session.ID
	seq := r.st.Session.LastEventSeq + 1
	c := lt.Checkpoint{
		ID: derivedID("ckpt_", sid, seq), SessionID: sid, TurnID: turnID, Step: step, Kind: kind, Name: name,
		Summary: summary, NextAction: next, EventSeq: seq, Artifacts: r.artifactIDs(), CreatedAt: r.e.clock.Now(),
	}
	id, stats, err := snapshot.Take(ctx, r.e.store, r.ws, snapshot.Options{MaxFileBytes: maxSnapshotFileBytes, MaxTotalBytes: maxSnapshotTotalBytes, Cache: r.e.snapshots})
	switch {
	case err == nil:
		c.Snapshot, c.Files, c.Bytes = id, stats.Files, stats.Bytes
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case errors.Is(err, fs.ErrNotExist):
		c.SnapshotError = "the workspace does not exist"
	default:
		c.SnapshotError = clip(err.Error(), 300)
	}
	if err := r.add(lt.EventCheckpointCreated, turnID, step, journal.CheckpointCreated{Checkpoint: c}); err != nil {
		return nil, err
	}
	return &c, nil
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
	return r.add(lt.EventToolCompleted, turnID, step, journal.ToolCompleted{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Output: out})
}

// workspaceLost reports whether the session's workspace is gone although
// the session already worked in it (a deleted directory, or a session that
// moved to a node without it). A session that never ran a tool simply gets
// a new one.
func (r *runner) workspaceLost() (bool, error) {
	_, err := os.Stat(r.ws)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("check workspace: %w", err)
	}
	if r.st.LastSnapshot == "" {
		// Never snapshotted: nothing to restore, and nothing to report
		// but a directory to create.
		if _, err := r.e.spaces.Ensure(r.st.WorkspaceID()); err != nil {
			return false, fmt.Errorf("create workspace: %w", err)
		}
		return false, nil
	}
	return true, nil
}

// restoreWorkspace recreates a lost workspace from the last checkpoint's
// snapshot, journals environment.lost and environment.restored, and tells
// the model (with the next tool result) what it has again.
func (r *runner) restoreWorkspace(ctx context.Context) error {
	turnID, step := r.st.CurrentTurn().ID, 0
	if r.st.Step != nil {
		step = r.st.Step.N
	}
	if err := r.add(lt.EventEnvironmentLost, turnID, step, journal.EnvironmentLost{Reason: "the workspace directory is gone"}); err != nil {
		return err
	}
	ws, err := r.e.spaces.Ensure(r.st.WorkspaceID())
	if err != nil {
		return fmt.Errorf("recreate workspace: %w", err)
	}
	r.ws = ws
	d := journal.EnvironmentRestored{Note: "The workspace was lost and recreated empty: no checkpoint had a snapshot of it. Files you made before are gone."}
	if snap := r.st.LastSnapshot; snap != "" {
		stats, err := snapshot.Restore(ctx, r.e.store, snap, ws)
		if err != nil {
			return fmt.Errorf("restore workspace from snapshot %s: %w", snap, err)
		}
		d.Snapshot, d.Files, d.Bytes = snap, stats.Files, stats.Bytes
		d.CheckpointID = r.st.LastSnapshotCheckpoint
		d.Note = fmt.Sprintf("The workspace was lost and restored from checkpoint %s (%d files): changes made after that checkpoint are gone; check them before you go on.", d.CheckpointID, stats.Files)
	}
	return r.add(lt.EventEnvironmentRestored, turnID, step, d)
}

const checkpointSchema = `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":200,"description":"A short name for this point of the work"},"summary":{"type":"string","description":"What exists now"},"next_action":{"type":"string","description":"What comes next, where a retry restarts"}},"required":["name"],"additionalProperties":false}`
