package environment_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// TestEmptyWorkspaceGetsNoSnapshotList: the snapshots of an unshared
// workspace nothing wrote to make no file beside it (an inode a session
// fewer), and the copy is known to hold them; after a restart, while it is
// still empty, too. The first call that may write puts the list on disk
// first (what it writes is the session's change since the snapshot, which
// an empty-copy check after a restart could not tell from a stale copy);
// a program left running records even the empty snapshot on disk; a
// change made behind the Environment's back, and a restart, leave a copy
// that does not hold the empty snapshot.
func TestEmptyWorkspaceGetsNoSnapshotList(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	blobs := environmenttest.NewBlobs(t)
	open := func(ws string) environment.Environment { // a node (again, after a restart)
		t.Helper()
		b, _ := localAt(t, root, blobs)
		env, err := b.Open(ctx, &environment.OpenParams{Workspace: ws, Session: ws, Unshared: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = env.Close() })
		return env
	}
	holds := func(env environment.Environment, id string) bool {
		t.Helper()
		ok, err := env.Holds(ctx, id)
		require.NoError(t, err)
		return ok
	}
	list := filepath.Join(root, "ses_e.snapshots")

	env := open("ses_e")
	empty, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	want, err := snapshot.EmptyID(snapshot.Options{})
	require.NoError(t, err)
	require.Equal(t, want, empty)
	require.NoFileExists(t, list)
	require.True(t, holds(env, empty))
	_, err = env.ReadFile(ctx, "none.txt", 0, 10)
	require.Error(t, err)
	_, err = env.List(ctx, ".", 10)
	require.NoError(t, err)
	require.NoFileExists(t, list, "reads write nothing")
	require.NoError(t, env.Close())

	// A restart while it is empty: it holds the empty snapshot.
	env = open("ses_e")
	require.False(t, env.Info().Provisioned)
	require.True(t, holds(env, empty), "an empty copy holds the empty snapshot")
	require.NoFileExists(t, list)

	// A write puts the list on disk before it lands, and a restart then
	// finds the copy holding the snapshot and the session's change.
	require.NoError(t, env.WriteFile(ctx, "a.txt", []byte("a")))
	require.FileExists(t, list)
	require.NoError(t, env.Close())
	env = open("ses_e")
	require.True(t, holds(env, empty), "the snapshot and the session's change since")

	// Each call that may write does so; a change behind the
	// Environment's back does not, and after a restart its copy is not
	// the empty snapshot.
	for i, write := range []func(environment.Environment) error{
		func(e environment.Environment) error { return e.WriteFileDirect(ctx, "d.txt", []byte("d")) },
		func(e environment.Environment) error { return e.Remove(ctx, "absent.txt") },
		func(e environment.Environment) error {
			_, err := e.Run(ctx, &tool.ExecRequest{Command: "true"})
			return err
		},
		func(e environment.Environment) error {
			p, err := e.Start(ctx, &sandbox.StartRequest{Command: "true"})
			if err == nil {
				<-p.Done()
			}
			return err
		},
		func(e environment.Environment) error {
			return e.WriteFileIf(ctx, "c.txt", []byte("c"), environment.Condition{Basis: workspace.BasisAbsent})
		},
		func(e environment.Environment) error {
			return e.RemoveIf(ctx, "c.txt", environment.Condition{Basis: workspace.BasisAbsent})
		},
		func(e environment.Environment) error {
			_, err := e.SQLiteQuery(ctx, &tool.SQLiteRequest{Database: "none.db", SQL: "select 1"})
			return err
		},
	} {
		ws := fmt.Sprintf("ses_w%d", i)
		e := open(ws)
		_, _, err := e.Snapshot(ctx)
		require.NoError(t, err)
		require.NoFileExists(t, filepath.Join(root, ws+".snapshots"))
		_ = write(e)
		require.FileExists(t, filepath.Join(root, ws+".snapshots"), "call %d", i)
	}
	// A program started before the snapshot may write after it: the
	// empty snapshot goes to disk while it runs.
	prog := open("ses_p")
	proc, err := prog.Start(ctx, &sandbox.StartRequest{Command: `rmdir "$TMPDIR"; echo ready; read line`})
	require.NoError(t, err)
	line, err := bufio.NewReader(proc.Stdout()).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line, "the workspace emptied of the local sandbox's TMPDIR")
	id, _, err := prog.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, empty, id)
	require.FileExists(t, filepath.Join(root, "ses_p.snapshots"))
	proc.Stop(5 * time.Second)
	<-proc.Done()

	behind := open("ses_b")
	_, _, err = behind.Snapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "ses_b", "x"), nil, 0o600))
	require.NoError(t, behind.Close())
	require.False(t, holds(open("ses_b"), empty))
}

// TestSharedWorkspaceKeepsItsListOnDisk: a session that may share its
// workspace (a sub-agent, or a root that may spawn one) records even its
// empty snapshots in the list's file; and a sub-agent's environment opened
// on a copy whose root kept its entries in memory writes them out first,
// so that after a restart the root still holds its snapshot although the
// sub-agent's files are in the copy (an empty-copy check would miss it and
// restore the root's snapshot over them).
func TestSharedWorkspaceKeepsItsListOnDisk(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	blobs := environmenttest.NewBlobs(t)
	backend := func() environment.Backend {
		t.Helper()
		b, _ := localAt(t, root, blobs)
		return b
	}
	open := func(b environment.Backend, session string, unshared bool) environment.Environment {
		t.Helper()
		ws := "ses_r"
		if session == "ses_s" {
			ws = session
		}
		env, err := b.Open(ctx, &environment.OpenParams{Workspace: ws, Session: session, Unshared: unshared})
		require.NoError(t, err)
		t.Cleanup(func() { _ = env.Close() })
		return env
	}
	list := filepath.Join(root, "ses_r.snapshots")

	// A root that may spawn: on disk at once.
	b := backend()
	env := open(b, "ses_s", false)
	empty, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "ses_s.snapshots"))

	// An unshared root, then a sub-agent: written out at the sub-agent's
	// opening.
	env = open(b, "ses_r", true)
	_, _, err = env.Snapshot(ctx)
	require.NoError(t, err)
	require.NoFileExists(t, list)
	child := open(b, "ses_child", false)
	require.FileExists(t, list)
	require.NoError(t, child.WriteFile(ctx, "from-child.txt", []byte("c")))

	// A restart before the sub-agent's next snapshot: the root's entry is
	// on disk.
	require.NoError(t, env.Close())
	require.NoError(t, child.Close())
	again := open(backend(), "ses_r", true)
	held, err := again.Holds(ctx, empty)
	require.NoError(t, err)
	require.True(t, held, "the root's entry survived the restart")
}
