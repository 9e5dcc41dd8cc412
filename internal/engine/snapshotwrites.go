package engine

import (
	"context"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
)

// Checkpoints are incremental (snapshot.Options.Incremental): a step's
// snapshot starts from the previous one and reads again only the paths
// written since, so a write_file step costs the same in an empty workspace
// and in one of a hundred thousand files. That holds only if the snapshot
// Cache hears of every change of a workspace. What the session's
// Environment does tells it itself (internal/environment): its WriteFile
// names its path, and its programs (a shell command, an MCP stdio server)
// make the next checkpoint walk the workspace, unless the Cache watches it
// (snapshot.CacheConfig.Watch): then a shell command's checkpoint reads
// only what the kernel reported changed. Here remain the other writers: a
// person's change names its path and the temporary file written beside
// it (before and after the write, so a checkpoint taken meanwhile by a
// sub-agent sharing the workspace neither hides the one nor keeps the
// other); a built-in that reaches the workspace other than through the
// Environment (runTool), a restore and a removal make the next checkpoint
// walk. So does every new runner: the record is this process's memory of
// the workspace, and while no runner held the session it could have
// changed in ways not journaled here. After a crash, or on another node,
// the Cache is empty and the first checkpoint walks.

// trackWrites tells the snapshot Cache that paths of ws are about to be
// written; call the returned function once they are.
func (e *Engine) trackWrites(ws string, paths ...string) (done func()) {
	if len(paths) == 0 {
		return func() {}
	}
	e.snapshots.NoteWrites(ws, paths...)
	return func() { e.snapshots.NoteWrites(ws, paths...) }
}

// restoreSnapshot restores snapshot snap into ws, telling the Cache that
// the workspace changed as a whole. A snapshot project does not own is
// refused (snapshot.CheckOwned).
func (e *Engine) restoreSnapshot(ctx context.Context, project, snap, ws string) (snapshot.Stats, error) {
	if err := snapshot.CheckOwned(ctx, e.store, e.store, project, snap); err != nil {
		return snapshot.Stats{}, err
	}
	defer e.snapshots.Forget(ws) // walked next, even if watched
	defer e.snapshots.BeginUnknownWrites(ws)()
	return snapshot.Restore(ctx, e.store, snap, ws)
}

// emptySnapshot returns the id of the snapshot of an empty workspace
// (storing its tree), which a stale copy is restored to when the journal
// has no snapshot to converge on. Rare: it is taken each time rather than
// kept, since nothing refers to it once used. It is claimed for project,
// which restores it next.
func (e *Engine) emptySnapshot(ctx context.Context, project string) (string, error) {
	id, _, err := snapshot.TakeEmpty(ctx, e.store, snapshot.Options{})
	if err == nil {
		_, err = snapshot.Claim(ctx, e.store, e.store, project, id, snapshot.ClaimOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("snapshot of an empty workspace: %w", err)
	}
	return id, nil
}

// removeWorkspace removes this node's copy of workspace id.
func (e *Engine) removeWorkspace(id string) error {
	if ws := e.spaces.Path(id); ws != "" {
		defer e.snapshots.Forget(ws)
	}
	return e.spaces.Remove(id)
}
