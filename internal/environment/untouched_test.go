package environment_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
)

// TestUntouchedWorkspaceIsMadeWhenNeeded: the workspace of a session no
// tool of which reaches it has no directory until something needs one. Its
// snapshots are the empty one, stored without a directory; it holds that
// snapshot and nothing else (no other snapshot, no person's change), across
// a restart too, without being a copy lost; a restore of the empty snapshot
// and a stop make nothing. The first call that needs the directory makes
// it, noted as holding the empty snapshot, so that what is written then is
// the session's change since, as in any copy; and a copy that was made and
// is gone again is not taken for an empty one.
func TestUntouchedWorkspaceIsMadeWhenNeeded(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	blobs := environmenttest.NewBlobs(t)
	open := func(ws string) environment.Environment { // a node (again, after a restart)
		t.Helper()
		b, _ := localAt(t, root, blobs)
		env, err := b.Open(ctx, &environment.OpenParams{Workspace: ws, Session: ws, Unshared: true, Untouched: true})
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
	dir, list := filepath.Join(root, "ses_u"), filepath.Join(root, "ses_u.snapshots")
	empty, err := snapshot.EmptyID(snapshot.Options{})
	require.NoError(t, err)

	env := open("ses_u")
	require.False(t, env.Info().Provisioned, "a copy not made yet is not a copy lost")
	require.NoDirExists(t, dir)
	id, stats, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, empty, id)
	require.Equal(t, 1, stats.NewBlobs, "the empty tree is stored: the snapshot can be restored anywhere")
	has, err := blobs.BlobHas(ctx, empty)
	require.NoError(t, err)
	require.True(t, has)
	require.True(t, holds(env, empty))
	require.False(t, holds(env, "change-3"), "no person's change is in a copy never made")
	require.False(t, holds(env, "0123abcd"))
	_, err = env.Restore(ctx, empty)
	require.NoError(t, err)
	require.NoError(t, env.Record(ctx, empty))
	require.NoDirExists(t, dir, "restoring the empty snapshot into a copy that holds it makes nothing")
	require.NoFileExists(t, list)
	require.NoError(t, env.Close())

	// A restart: still empty, held, not lost.
	env = open("ses_u")
	require.False(t, env.Info().Provisioned)
	require.True(t, holds(env, empty))
	require.NoDirExists(t, dir)
	require.NoError(t, env.Stop(ctx, empty), "an idle stop of a copy never made")
	require.NoDirExists(t, dir)

	// A read makes the directory (and finds nothing); a write then is
	// the session's change since the empty snapshot, kept across a
	// restart.
	env = open("ses_u")
	_, err = env.ReadFile(ctx, "none.txt", 0, 10)
	require.Error(t, err)
	require.DirExists(t, dir)
	require.NoFileExists(t, list, "a read writes nothing")
	require.True(t, holds(env, empty))
	require.NoError(t, env.WriteFile(ctx, "a.txt", []byte("a")))
	require.FileExists(t, filepath.Join(dir, "a.txt"))
	require.FileExists(t, list, "what the copy holds is on disk before a file lands in it")
	require.NoError(t, env.Close())
	env = open("ses_u")
	require.True(t, holds(env, empty), "the empty snapshot, and the session's write since")
	full, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.NotEqual(t, empty, full)
	require.NoError(t, env.Close())

	// Gone again (deleted behind the node's back): the copy is empty, and
	// holds neither its last snapshot nor, as a copy made, anything said.
	require.NoError(t, os.RemoveAll(dir))
	env = open("ses_u")
	require.False(t, holds(env, full), "a copy gone is not taken for the snapshot it held")
	require.NoFileExists(t, list, "the list of a copy gone goes with it")
	_, err = env.Restore(ctx, full)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "a", string(data))
	require.True(t, holds(env, full))

	// Gone while open: a copy lost, not an empty one.
	require.NoError(t, os.RemoveAll(dir))
	require.False(t, holds(env, empty))
	_, _, err = env.Snapshot(ctx)
	require.Error(t, err, "a snapshot of a copy gone is no snapshot of an empty one")
}

// TestUntouchedOnlyUnshared: a workspace a sub-agent may share is never
// left unmade (its tools may write at any time).
func TestUntouchedOnlyUnshared(t *testing.T) {
	b, _ := localAt(t, t.TempDir(), environmenttest.NewBlobs(t))
	_, err := b.Open(context.Background(), &environment.OpenParams{Workspace: "ses_s", Session: "ses_s", Untouched: true})
	require.ErrorContains(t, err, "params.untouched")
}
