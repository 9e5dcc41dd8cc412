package environment_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// TestEmptyWorkspaceGetsNoSnapshotList: the snapshots of a workspace no
// tool wrote to make no file beside it (an inode a session fewer), yet the
// copy is known to hold them, after a write since (the session's own
// change), and after a restart while it is still empty; a copy with a file
// in it, after a restart, does not hold the empty snapshot.
func TestEmptyWorkspaceGetsNoSnapshotList(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	blobs := environmenttest.NewBlobs(t)
	open := func() environment.Environment { // a node (again, after a restart)
		t.Helper()
		spaces, err := workspace.New(root)
		require.NoError(t, err)
		b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs, SocketDir: t.TempDir()})
		require.NoError(t, err)
		env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_e", Session: "ses_e", Unshared: true})
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

	env := open()
	empty, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	want, err := snapshot.EmptyID(snapshot.Options{})
	require.NoError(t, err)
	require.Equal(t, want, empty)
	require.NoFileExists(t, list)
	require.True(t, holds(env, empty))
	require.NoError(t, env.WriteFile(ctx, "a.txt", []byte("a")))
	require.True(t, holds(env, empty), "the snapshot and the session's change since")
	require.NoError(t, env.Close())

	// A restart with a file in the copy: the entry is forgotten, and the
	// copy is not the empty snapshot.
	env = open()
	require.False(t, env.Info().Provisioned)
	require.False(t, holds(env, empty))
	require.NoError(t, env.Remove(ctx, "a.txt"))
	require.True(t, holds(env, empty), "an empty copy holds the empty snapshot")
	require.NoFileExists(t, list)

	// The first snapshot of something makes the list.
	require.NoError(t, env.WriteFile(ctx, "b.txt", []byte("b")))
	full, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.FileExists(t, list)
	require.True(t, holds(env, full))
	require.NoError(t, env.Close())
	env = open()
	require.True(t, holds(env, full), "read from the list after a restart")
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
		spaces, err := workspace.New(root)
		require.NoError(t, err)
		b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs, SocketDir: t.TempDir()})
		require.NoError(t, err)
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
