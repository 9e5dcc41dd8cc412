package environment_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// TestSnapshotsAreClaimedForTheirProject: a snapshot the server takes is
// its project's, blob by blob, and no other project's; recording it
// reads only the trees the project did not own yet: after a one-file
// change, the root's and that file's directory's, whatever the size of
// the workspace (issue 18: a step's cost is flat in the workspace size).
func TestSnapshotsAreClaimedForTheirProject(t *testing.T) {
	ctx := t.Context()
	b, blobs, owners := newOwnedBackend(t)

	_, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_np", Session: "ses_np"})
	require.NoError(t, err, "opening needs no project")
	noProject, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_np2", Session: "ses_np2"})
	require.NoError(t, err)
	defer noProject.Close()
	_, _, err = noProject.Snapshot(ctx)
	require.ErrorContains(t, err, "params.project", "a snapshot must say whose it is")

	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_big", Session: "ses_big", Project: "alpha"})
	require.NoError(t, err)
	defer env.Close()
	for d := range 30 {
		for f := range 10 {
			require.NoError(t, env.WriteFile(ctx, fmt.Sprintf("d%d/f%d.txt", d, f), fmt.Appendf(nil, "file %d of dir %d", f, d)))
		}
	}
	first, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	m, err := snapshot.Load(ctx, blobs.Store, first)
	require.NoError(t, err)
	all := []string{first}
	for _, e := range m.Entries {
		all = append(all, e.SHA256)
	}
	owned, err := blobs.Store.BlobsOwned(ctx, "alpha", all)
	require.NoError(t, err)
	require.Len(t, owned, 1+30+300, "the root, every directory's tree and every file")
	owned, err = blobs.Store.BlobsOwned(ctx, "beta", all)
	require.NoError(t, err)
	require.Empty(t, owned, "another project owns none of it")

	before, reads := blobs.TotalGets(), owners.reads.Load()
	again, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, before, blobs.TotalGets(), "an unchanged workspace: its root is owned, nothing is read")
	require.Equal(t, reads, owners.reads.Load(), "the snapshot this environment claimed last: no ownership read either (a round trip on PostgreSQL)")

	require.NoError(t, env.WriteFile(ctx, "d7/f3.txt", []byte("changed")))
	asked := owners.asked.Load()
	second, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, before, blobs.TotalGets(), "no tree read: the new root and d7's new tree are the Take's, the last snapshot's in memory")
	require.Equal(t, int64(4), owners.asked.Load()-asked, "asked about the root with the last snapshot (is it still the project's?), d7's tree and the file: not the root's 29 other directories nor d7's 9 other files")
	owned, err = blobs.Store.BlobsOwned(ctx, "alpha", []string{second, environmenttest.Digest([]byte("changed"))})
	require.NoError(t, err)
	require.Len(t, owned, 2)

	// A change elsewhere: the same questions, and one read, d12's tree in
	// the last snapshot, to compare with (the last claim kept only the
	// trees it read).
	require.NoError(t, env.WriteFile(ctx, "d12/f0.txt", []byte("changed too")))
	before, asked = blobs.TotalGets(), owners.asked.Load()
	third, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, before+1, blobs.TotalGets())
	require.Equal(t, int64(4), owners.asked.Load()-asked)
	owned, err = blobs.Store.BlobsOwned(ctx, "alpha", []string{third, environmenttest.Digest([]byte("changed too"))})
	require.NoError(t, err)
	require.Len(t, owned, 2)
}

// TestSnapshotClaimedOnceForItsProject: a snapshot the backend claimed for
// a project is not claimed again by another session of the project with
// the same files (the empty workspace most of all): no ownership read, a
// round trip on PostgreSQL. Another project with the same files claims it
// for itself, and owns it afterwards.
func TestSnapshotClaimedOnceForItsProject(t *testing.T) {
	ctx := t.Context()
	b, blobs, owners := newOwnedBackend(t)
	snap := func(session, project string, files map[string]string) string {
		t.Helper()
		env, err := b.Open(ctx, &environment.OpenParams{Workspace: session, Session: session, Project: project})
		require.NoError(t, err)
		defer env.Close()
		for name, data := range files {
			require.NoError(t, env.WriteFile(ctx, name, []byte(data)))
		}
		id, _, err := env.Snapshot(ctx)
		require.NoError(t, err)
		return id
	}
	files := map[string]string{"a/b.txt": "shared", "c.txt": "too"}

	empty := snap("ses_e1", "alpha", nil)
	full := snap("ses_f1", "alpha", files)
	reads := owners.reads.Load()
	require.Equal(t, empty, snap("ses_e2", "alpha", nil))
	require.Equal(t, full, snap("ses_f2", "alpha", files))
	require.Equal(t, reads, owners.reads.Load(), "claimed by this backend for alpha already: no ownership read")

	owned, err := blobs.Store.BlobsOwned(ctx, "beta", []string{empty, full})
	require.NoError(t, err)
	require.Empty(t, owned, "alpha's claims are alpha's")
	require.Equal(t, full, snap("ses_f3", "beta", files))
	require.Greater(t, owners.reads.Load(), reads, "another project: its own claim, with its reads")
	owned, err = blobs.Store.BlobsOwned(ctx, "beta", []string{full, environmenttest.Digest([]byte("shared"))})
	require.NoError(t, err)
	require.Len(t, owned, 2, "beta owns what it claimed, down to the files")
	owned, err = blobs.Store.BlobsOwned(ctx, "beta", []string{empty})
	require.NoError(t, err)
	require.Empty(t, owned, "and nothing it did not")
}

// TestRestoreOfABackfilledSnapshot: a snapshot journaled before owners
// were kept has only its root recorded (migration 015 records the roots
// of the checkpoints' snapshots): its project restores it, and the
// restore records every blob below the root, so that the project's
// runners may fetch them and name them without sending them again.
func TestRestoreOfABackfilledSnapshot(t *testing.T) {
	ctx := t.Context()
	blobs := environmenttest.NewBlobs(t)
	newBackend := func(owners snapshot.Owners) environment.Backend {
		spaces, err := workspace.New(t.TempDir())
		require.NoError(t, err)
		b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs,
			Owners: owners, SocketDir: t.TempDir()})
		require.NoError(t, err)
		return b
	}
	// Before 015: nothing is recorded.
	old, err := newBackend(nil).Open(ctx, &environment.OpenParams{Workspace: "ses_old", Session: "ses_old", Project: "alpha"})
	require.NoError(t, err)
	defer old.Close()
	require.NoError(t, old.WriteFile(ctx, "dir/a.txt", []byte("old file")))
	id, _, err := old.Snapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, blobs.Store.BlobOwnTrees(ctx, "alpha", []string{id}), "what the migration records: the root, as a tree")

	b := newBackend(blobs.Store)
	other, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_b", Session: "ses_b", Project: "beta"})
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Restore(ctx, id)
	require.ErrorIs(t, err, snapshot.ErrNotOwned, "another project")

	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_new", Session: "ses_new", Project: "alpha"})
	require.NoError(t, err)
	defer env.Close()
	_, err = env.Restore(ctx, id)
	require.NoError(t, err)
	got, err := env.ReadFile(ctx, "dir/a.txt", 0, 100)
	require.NoError(t, err)
	require.Equal(t, "old file", string(got.Data))
	m, err := snapshot.Load(ctx, blobs.Store, id)
	require.NoError(t, err)
	var below []string
	for _, e := range m.Entries {
		below = append(below, e.SHA256)
	}
	owned, err := blobs.Store.BlobsOwned(ctx, "alpha", below)
	require.NoError(t, err)
	require.Len(t, owned, len(below), "the restore recorded what the root reaches")
}

// newOwnedBackend returns a local backend whose owners are kept in its
// blob store, with their reads counted.
func newOwnedBackend(t *testing.T) (environment.Backend, *environmenttest.Blobs, *countingOwners) {
	t.Helper()
	blobs := environmenttest.NewBlobs(t)
	spaces, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	owners := &countingOwners{Owners: blobs.Store}
	b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs,
		Owners: owners, SocketDir: t.TempDir()})
	require.NoError(t, err)
	return b, blobs, owners
}

// countingOwners counts the ownership reads of the store it wraps.
type countingOwners struct {
	snapshot.Owners
	reads atomic.Int64
	asked atomic.Int64 // digests BlobOwnership was asked about
}

func (o *countingOwners) BlobOwnership(ctx context.Context, project string, digests []string) (map[string]bool, error) {
	o.reads.Add(1)
	o.asked.Add(int64(len(digests)))
	return o.Owners.BlobOwnership(ctx, project, digests)
}

func (o *countingOwners) BlobsOwned(ctx context.Context, project string, digests []string) (map[string]bool, error) {
	o.reads.Add(1)
	return o.Owners.BlobsOwned(ctx, project, digests)
}

// TestSnapshotClaimedAgainstARootRecordedAlone: a copy that still holds a
// snapshot journaled before owners were kept (its root's row alone, as
// the migration recorded it, and no restore since: the engine found the
// copy holding it) takes it again, then a step changes a file beside an
// old one. The new snapshot is claimed against the old one; a runner's
// restore of it (snapshot.CheckOwned, then a fetch that asks about each
// blob) must find the old file owned, with a row of its own.
func TestSnapshotClaimedAgainstARootRecordedAlone(t *testing.T) {
	ctx := t.Context()
	blobs := environmenttest.NewBlobs(t)
	dir := t.TempDir()
	newBackend := func(owners snapshot.Owners) environment.Backend {
		spaces, err := workspace.New(dir)
		require.NoError(t, err)
		b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs,
			Owners: owners, SocketDir: t.TempDir()})
		require.NoError(t, err)
		return b
	}
	old, err := newBackend(nil).Open(ctx, &environment.OpenParams{Workspace: "ses_a", Session: "ses_a", Project: "alpha"})
	require.NoError(t, err)
	require.NoError(t, old.WriteFile(ctx, "dir/a.txt", []byte("old file")))
	id, _, err := old.Snapshot(ctx)
	require.NoError(t, err)
	old.Close()
	require.NoError(t, blobs.Store.BlobOwnTrees(ctx, "alpha", []string{id}), "the migration's row: the root alone")

	env, err := newBackend(blobs.Store).Open(ctx, &environment.OpenParams{Workspace: "ses_a", Session: "ses_a", Project: "alpha"})
	require.NoError(t, err)
	defer env.Close()
	again, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, id, again)
	require.NoError(t, env.WriteFile(ctx, "dir/b.txt", []byte("a step's file")))
	next, _, err := env.Snapshot(ctx)
	require.NoError(t, err)

	require.NoError(t, snapshot.CheckOwned(ctx, blobs.Store, blobs.Store, "alpha", next), "a runner's restore is allowed")
	oldFile := environmenttest.Digest([]byte("old file"))
	owned, err := blobs.Store.BlobsOwned(ctx, "alpha", []string{oldFile})
	require.NoError(t, err)
	require.True(t, owned[oldFile], "and its fetch of dir/a.txt finds it the project's")
}

// TestCopyWithNoBaseAdoptsARestoredOrClaimedSnapshot: a copy with no base
// restored to a snapshot, or holding one another session claimed,
// compares its next snapshot's root with it: 30 directories of 10 files,
// one file added to one, 2+1+11 digests asked, not 1+30+11.
func TestCopyWithNoBaseAdoptsARestoredOrClaimedSnapshot(t *testing.T) {
	for _, how := range []string{"restore", "claimed"} {
		t.Run(how, func(t *testing.T) {
			ctx := t.Context()
			b, _, owners := newOwnedBackend(t)
			write := func(env environment.Environment) {
				for d := range 30 {
					for f := range 10 {
						require.NoError(t, env.WriteFile(ctx, fmt.Sprintf("d%d/f%d.txt", d, f), fmt.Appendf(nil, "file %d of dir %d", f, d)))
					}
				}
			}
			env1, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_1", Session: "ses_1", Project: "alpha"})
			require.NoError(t, err)
			defer env1.Close()
			write(env1)
			first, _, err := env1.Snapshot(ctx)
			require.NoError(t, err)

			env2, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_2", Session: "ses_2", Project: "alpha"})
			require.NoError(t, err)
			defer env2.Close()
			if how == "restore" {
				_, err = env2.Restore(ctx, first)
				require.NoError(t, err)
			} else {
				write(env2)
				id, _, err := env2.Snapshot(ctx)
				require.NoError(t, err)
				require.Equal(t, first, id)
			}
			require.NoError(t, env2.WriteFile(ctx, "d7/new.txt", []byte("changed")))
			asked := owners.asked.Load()
			_, _, err = env2.Snapshot(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2+1+11), owners.asked.Load()-asked)
		})
	}
}
