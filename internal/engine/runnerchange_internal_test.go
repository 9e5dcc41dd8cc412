package engine

import (
	"context"
	"fmt"
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

// TestAChangeIsMadeOnceWhateverTwoNodesDo: one person's change is applied
// by two nodes (the one that reaches the runner, at once, and another one
// catching up at a claim), each through its own Environment of the same
// workspace, while a program of the environment writes the file. Applied
// by the first, it is not made again by the second (its marker was
// recorded with it), nor reported as a conflict; found in conflict by the
// first, it is never made by the second, even once the path holds what
// the person saw again.
func TestAChangeIsMadeOnceWhateverTwoNodesDo(t *testing.T) {
	ctx := context.Background()
	p := newLocalParts(t)
	e, err := New(p.st, &Config{WorkspaceRoot: filepath.Join(p.dir, "workspaces"), NodeID: "node-a", Workspaces: p.spaces, SnapshotCache: p.cache, Environments: p.local})
	require.NoError(t, err)
	open := func() environment.Environment {
		env, err := p.local.Open(ctx, &environment.OpenParams{Workspace: "ses_twice", Session: "ses_twice"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = env.Close() })
		return env
	}
	atOnce, atClaim := open(), open()
	program := func(command string) {
		t.Helper()
		res, err := atOnce.Run(ctx, &tool.ExecRequest{Command: command})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, res.Stderr)
	}
	content := func(rel string) string {
		t.Helper()
		r, err := atOnce.ReadFile(ctx, rel, 0, 100)
		if err != nil {
			return err.Error()
		}
		return string(r.Data)
	}
	data := []byte("by-a-person")
	sum := sha256Hex(data)
	require.NoError(t, p.st.BlobPut(ctx, sum, data))
	st := &journal.State{}

	// Applied at once; the program writes the file; the claim catches up.
	made := journal.PersonChange{Seq: 5, Op: lt.WorkspaceWrite, Path: "a.txt", SHA256: sum, BasedOn: lt.BasedOnAbsent}
	failed, notApplied, err := e.applyChanges(ctx, st, atOnce, []journal.PersonChange{made})
	require.NoError(t, err)
	require.Empty(t, failed)
	require.Empty(t, notApplied)
	program("printf by-a-program > a.txt")
	failed, notApplied, err = e.applyChanges(ctx, st, atClaim, []journal.PersonChange{made})
	require.NoError(t, err)
	require.Empty(t, failed)
	require.Empty(t, notApplied, "made already: no conflict to report")
	require.Equal(t, "by-a-program", content("a.txt"), "not made twice over the program's write")

	// Found in conflict at once; the path is back to what the person saw
	// (absent) when the claim catches up.
	program("printf by-a-program > b.txt")
	judged := journal.PersonChange{Seq: 6, Op: lt.WorkspaceWrite, Path: "b.txt", SHA256: sum, BasedOn: lt.BasedOnAbsent}
	_, notApplied, err = e.applyChanges(ctx, st, atOnce, []journal.PersonChange{judged})
	require.NoError(t, err)
	require.Len(t, notApplied, 1)
	require.Equal(t, lt.NotAppliedConflict, notApplied[0].Reason)
	program("rm b.txt")
	_, notApplied, err = e.applyChanges(ctx, st, atClaim, []journal.PersonChange{judged})
	require.NoError(t, err)
	require.Len(t, notApplied, 1, "a conflict for the claim too")
	require.Equal(t, lt.NotAppliedConflict, notApplied[0].Reason)
	require.Contains(t, content("b.txt"), "no such file", "never made after it was found in conflict")
	held, err := atClaim.Holds(ctx, changeMarker(judged.Seq))
	require.NoError(t, err)
	require.False(t, held)

	// Both at once: made by one, and only once.
	both := journal.PersonChange{Seq: 7, Op: lt.WorkspaceDelete, Path: "a.txt", BasedOn: basisOf([]byte("by-a-program"))}
	errs := make(chan error, 2)
	for _, env := range []environment.Environment{atOnce, atClaim} {
		go func() {
			failed, notApplied, err := e.applyChanges(ctx, st, env, []journal.PersonChange{both})
			if err == nil && len(failed)+len(notApplied) > 0 {
				err = fmt.Errorf("failed %v, not applied %v", failed, notApplied)
			}
			errs <- err
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.Contains(t, content("a.txt"), "no such file")
}
