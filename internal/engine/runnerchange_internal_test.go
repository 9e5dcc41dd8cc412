package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPersonChangeNotAppliedThroughAPlantedSymlink: a person's write was
// accepted while notes.md was a plain path; before it is applied to the
// environment (a runner's, at the session's next claim), the model makes
// notes.md a symlink to scripts/deploy.sh and linked a symlink to scripts.
// Applying the changes then ends each one as not applied ("failed": the
// model's planted links would make it fail at every try, and a runner's
// workspace that lacks its marker would be restored at every claim):
// nothing is written through the links, and no marker says the workspace
// holds them.
func TestPersonChangeNotAppliedThroughAPlantedSymlink(t *testing.T) {
	ctx := context.Background()
	p := newLocalParts(t)
	st, local := p.st, p.local
	e, err := New(st, &Config{WorkspaceRoot: filepath.Join(p.dir, "workspaces"), NodeID: "node-a", Workspaces: p.spaces, SnapshotCache: p.cache, Environments: local})
	require.NoError(t, err)
	env, err := local.Open(ctx, &environment.OpenParams{Workspace: "ses_planted", Session: "ses_planted"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Close() })
	require.NoError(t, env.WriteFile(ctx, "scripts/deploy.sh", []byte("deploy")))
	res, err := env.Run(ctx, &tool.ExecRequest{Command: "ln -s scripts/deploy.sh notes.md && ln -s scripts linked"})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, res.Stderr)

	data := []byte("a person's notes")
	sum := sha256Hex(data)
	require.NoError(t, st.BlobPut(ctx, sum, data))
	changes := []journal.PersonChange{
		{Seq: 1, Op: lt.WorkspaceWrite, Path: "notes.md", SHA256: sum},
		{Seq: 2, Op: lt.WorkspaceWrite, Path: "linked/deploy.sh", SHA256: sum},
	}
	failed, conflicts, err := e.applyChanges(ctx, &journal.State{}, env, changes)
	require.NoError(t, err)
	require.Empty(t, failed, "none to try again")
	require.Len(t, conflicts, 2, "each is reported as not applied")
	for i, path := range []string{"notes.md", "linked/deploy.sh"} {
		require.Equal(t, path, conflicts[i].Path)
		require.Equal(t, lt.NotAppliedFailed, conflicts[i].Reason, "not a conflict: no basis to compare, checked against the live workspace")
		require.Contains(t, conflicts[i].Error, "symlink")
	}
	r, err := env.ReadFile(ctx, "scripts/deploy.sh", 0, 100)
	require.NoError(t, err)
	require.Equal(t, "deploy", string(r.Data), "nothing was written through the links")
	for _, c := range changes {
		held, err := env.Holds(ctx, changeMarker(c.Seq))
		require.NoError(t, err)
		require.False(t, held, "no marker of a change not applied")
	}
}

// localParts are what an internal test's engine with this node's own
// environments is made of: a real SQLite store, workspaces, the snapshot
// cache and the local backend, under dir.
type localParts struct {
	dir    string
	st     *sqlite.Store
	spaces *workspace.Manager
	cache  *snapshot.Cache
	local  environment.Backend
}

func newLocalParts(t *testing.T) *localParts {
	t.Helper()
	ctx := context.Background()
	p := &localParts{dir: t.TempDir()}
	var err error
	p.st, err = sqlite.Open(ctx, filepath.Join(p.dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, p.st.Migrate(ctx))
	t.Cleanup(func() { p.st.Close() })
	p.spaces, err = workspace.New(filepath.Join(p.dir, "workspaces"))
	require.NoError(t, err)
	p.cache, err = snapshot.NewCache(p.st, nil)
	require.NoError(t, err)
	p.local, err = environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: p.spaces, Blobs: p.st, Cache: p.cache})
	require.NoError(t, err)
	return p
}

// TestPersonChangeNotAppliedWhereTheModelMadeAFileOrADirectory: a
// person's write was accepted while its path was free; before it is
// applied (at the session's next claim, to a runner's workspace), the
// model made a file where the path needs a directory ("not a directory")
// and a directory at the path itself. Applying the changes ends each one
// as not applied ("failed", saying why): trying again would fail again.
// The model's file and directory are left as they are, and no marker says
// the workspace holds the changes.
func TestPersonChangeNotAppliedWhereTheModelMadeAFileOrADirectory(t *testing.T) {
	ctx := context.Background()
	p := newLocalParts(t)
	e, err := New(p.st, &Config{WorkspaceRoot: filepath.Join(p.dir, "workspaces"), NodeID: "node-a", Workspaces: p.spaces, SnapshotCache: p.cache, Environments: p.local})
	require.NoError(t, err)
	env, err := p.local.Open(ctx, &environment.OpenParams{Workspace: "ses_files", Session: "ses_files"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Close() })
	require.NoError(t, env.WriteFile(ctx, "notes", []byte("the model's notes")))
	require.NoError(t, env.WriteFile(ctx, "report/draft.md", []byte("the model's draft")))

	data := []byte("a person's text")
	sum := sha256Hex(data)
	require.NoError(t, p.st.BlobPut(ctx, sum, data))
	changes := []journal.PersonChange{
		{Seq: 1, Op: lt.WorkspaceWrite, Path: "notes/today.md", SHA256: sum},
		{Seq: 2, Op: lt.WorkspaceWrite, Path: "report", SHA256: sum},
	}
	failed, notApplied, err := e.applyChanges(ctx, &journal.State{}, env, changes)
	require.NoError(t, err)
	require.Empty(t, failed, "none to try again")
	require.Len(t, notApplied, 2, "each is reported as not applied")
	for i, c := range changes {
		require.Equal(t, c.Path, notApplied[i].Path)
		require.Equal(t, lt.NotAppliedFailed, notApplied[i].Reason)
		require.Contains(t, notApplied[i].Error, "names a directory")
		held, err := env.Holds(ctx, changeMarker(c.Seq))
		require.NoError(t, err)
		require.False(t, held, "no marker of a change not applied")
	}
	for path, want := range map[string]string{"notes": "the model's notes", "report/draft.md": "the model's draft"} {
		r, err := env.ReadFile(ctx, path, 0, 100)
		require.NoError(t, err)
		require.Equal(t, want, string(r.Data), "the model's %s is kept", path)
	}
}
