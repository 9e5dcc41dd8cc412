package engine

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// Checkpoints are incremental (snapshot.Options.Incremental): a step's
// snapshot starts from the previous one and reads again only the paths
// written since, so a write_file step costs the same in an empty workspace
// and in one of a hundred thousand files. That holds only if the snapshot
// Cache hears of every change of a workspace, so every writer here tells
// it: write_file and edit_file, and a person's change, name their paths
// (before and after the write, so a checkpoint taken meanwhile by a
// sub-agent sharing the workspace does not hide it); any other tool (a
// shell command, an MCP server, a tool this file does not know), a restore
// and a removal make the next checkpoint walk the workspace, unless the
// Cache watches it (snapshot.CacheConfig.Watch): then a shell command's
// checkpoint reads only what the kernel reported changed. So does every
// new runner: the record is this process's memory of the workspace, and
// while no runner held the session it could have changed in ways not
// journaled here. After a crash, or on another node, the Cache is empty and
// the first checkpoint walks.

// callWrites returns what a built-in call may write in the workspace: the
// paths, when the tool says exactly (known), else anything.
func callWrites(t tool.Tool, args json.RawMessage) (paths []string, known bool) {
	switch t.(type) {
	case *tool.ReadFile, *tool.ListFiles:
		return nil, true
	case *tool.WriteFile, *tool.EditFile:
		var a struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, false
		}
		c, err := workspace.CleanPath(a.Path)
		if err != nil || c == "." {
			return nil, false // refused by the tool; walked anyway, to be sure
		}
		return []string{filepath.ToSlash(c)}, true
	}
	return nil, false
}

// trackCall tells the snapshot Cache that built-in t is about to run in
// ws; call the returned function when it is over.
func (e *Engine) trackCall(ws string, t tool.Tool, args json.RawMessage) (done func()) {
	paths, known := callWrites(t, args)
	if !known {
		return e.snapshots.BeginUnknownWrites(ws)
	}
	return e.trackWrites(ws, paths...)
}

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
// the workspace changed as a whole.
func (e *Engine) restoreSnapshot(ctx context.Context, snap, ws string) (snapshot.Stats, error) {
	defer e.snapshots.Forget(ws) // walked next, even if watched
	defer e.snapshots.BeginUnknownWrites(ws)()
	return snapshot.Restore(ctx, e.store, snap, ws)
}

// removeWorkspace removes this node's copy of workspace id.
func (e *Engine) removeWorkspace(id string) error {
	if ws := e.spaces.Path(id); ws != "" {
		defer e.snapshots.Forget(ws)
	}
	return e.spaces.Remove(id)
}
