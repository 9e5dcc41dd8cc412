package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
)

// askCounter counts the digests a store's owners are asked about by
// Claim (BlobOwnership).
type askCounter struct {
	hub.OwnerStore
	asked atomic.Int64
}

func (o *askCounter) BlobOwnership(ctx context.Context, project string, digests []string) (map[string]bool, error) {
	o.asked.Add(int64(len(digests)))
	return o.OwnerStore.BlobOwnership(ctx, project, digests)
}

// countedRig is a rig whose owners count the digests Claim asks about.
func countedRig(t *testing.T) (*environmenttest.Blobs, *rig, *askCounter) {
	t.Helper()
	blobs := environmenttest.NewBlobs(t)
	var owners *askCounter
	rg := newRig(t, blobs, rigOptions{owners: func(s hub.OwnerStore) hub.OwnerStore {
		owners = &askCounter{OwnerStore: s}
		return owners
	}})
	return blobs, rg, owners
}

// writeDirs writes 30 directories of 10 files into env.
func writeDirs(t *testing.T, env environment.Environment) {
	t.Helper()
	for d := range 30 {
		for f := range 10 {
			require.NoError(t, env.WriteFile(t.Context(), fmt.Sprintf("d%d/f%d.txt", d, f), fmt.Appendf(nil, "file %d of dir %d", f, d)))
		}
	}
}

// TestRunnerSnapshotClaimedAgainstTheLast: a runner's snapshot is claimed
// against the copy's last one, as a local copy's is: after one file
// changed in a workspace of 30 directories of 10 files, the store is
// asked about the root (with the last snapshot), the directory's tree and
// the file, not about the root's 29 other directories nor the
// directory's 9 other files. What the runner sent is its project's. A
// restore leaves the base, one of the copy's own claims, as it is.
func TestRunnerSnapshotClaimedAgainstTheLast(t *testing.T) {
	blobs, rg, owners := countedRig(t)
	ctx := t.Context()
	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_big", Session: "ses_big"})
	require.NoError(t, err)
	defer env.Close()
	writeDirs(t, env)
	first, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.True(t, ownsAny(t, blobs, project, first)[first])

	require.NoError(t, env.WriteFile(ctx, "d7/f3.txt", []byte("changed")))
	asked := owners.asked.Load()
	second, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), owners.asked.Load()-asked, "the root with the last snapshot, d7's tree and the file")
	changed := environmenttest.Digest([]byte("changed"))
	require.Equal(t, map[string]bool{second: true, changed: true}, ownsAny(t, blobs, project, second, changed))

	// Restored to the first, the copy's next snapshot is claimed against
	// the last one claimed, the second: d7's tree is the first's again
	// (owned as a tree: taken for what it reaches), d12's and its file
	// are new.
	_, err = env.Restore(ctx, first)
	require.NoError(t, err)
	require.NoError(t, env.WriteFile(ctx, "d12/f0.txt", []byte("changed too")))
	asked = owners.asked.Load()
	third, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), owners.asked.Load()-asked, "the root with the last snapshot, d7's and d12's trees and the file")
	changed = environmenttest.Digest([]byte("changed too"))
	require.Equal(t, map[string]bool{third: true, changed: true}, ownsAny(t, blobs, project, third, changed))
}

// TestWrappedTreeRefusedAgainstTheLast: a runner whose last snapshot was
// accepted (and is what its next one is claimed against) answers a root
// that names, at the path where the last one had a directory of its own,
// another project's snapshot, subtree or file, or keeps that directory
// and adds the other project's at a new name: each is refused, as
// without a last snapshot. What the last snapshot names is taken as
// owned; nothing else is.
func TestWrappedTreeRefusedAgainstTheLast(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	ctx := t.Context()
	secret := "the other project's secret"
	foreignID, foreignDir := foreignSnapshot(t, blobs, map[string]string{"secret.txt": secret, "dir/deep.txt": "deeper secret"})
	secretDigest := environmenttest.Digest([]byte(secret))

	mine := []byte("my own file")
	myDir := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"f","type":"file","mode":420,"size":%d,"sha256":%q}]}`, len(mine), environmenttest.Digest(mine)))
	myDirEntry := fmt.Sprintf(`{"name":"d","type":"dir","mode":493,"tree":%q}`, environmenttest.Digest(myDir))
	root := []byte(`{"v":1,"entries":[` + myDirEntry + `]}`)
	send := [][]byte{mine, myDir}
	env := treeLiar(t, rg, &send, &root)

	last, _, err := env.Snapshot(ctx)
	require.NoError(t, err, "its own files, sent")
	require.Len(t, ownsAny(t, blobs, project, last, environmenttest.Digest(myDir), environmenttest.Digest(mine)), 3)

	send = nil // from now on the runner sends only its roots
	for name, entries := range map[string]string{
		"the other project's root at d":      fmt.Sprintf(`{"name":"d","type":"dir","mode":493,"tree":%q}`, foreignID),
		"its subtree at d":                   fmt.Sprintf(`{"name":"d","type":"dir","mode":493,"tree":%q}`, foreignDir),
		"its file's content at d":            fmt.Sprintf(`{"name":"d","type":"file","mode":420,"size":%d,"sha256":%q}`, len(secret), secretDigest),
		"d kept, the other's subtree at e":   myDirEntry + "," + fmt.Sprintf(`{"name":"e","type":"dir","mode":493,"tree":%q}`, foreignDir),
		"d kept, the other's file's content": myDirEntry + "," + fmt.Sprintf(`{"name":"e","type":"file","mode":420,"size":%d,"sha256":%q}`, len(secret), secretDigest),
		"d kept, the other's root at e":      myDirEntry + "," + fmt.Sprintf(`{"name":"e","type":"dir","mode":493,"tree":%q}`, foreignID),
	} {
		root = []byte(`{"v":1,"entries":[` + entries + `]}`)
		_, _, err = env.Snapshot(ctx)
		require.ErrorIs(t, err, snapshot.ErrNotOwned, name)
		require.Empty(t, ownsAny(t, blobs, project, environmenttest.Digest(root), foreignID, foreignDir, secretDigest), name)
	}

	// Its own directory under another name, with nothing sent: owned
	// through the last snapshot, accepted.
	root = []byte(`{"v":1,"entries":[` + fmt.Sprintf(`{"name":"copy","type":"dir","mode":493,"tree":%q}`, environmenttest.Digest(myDir)) + "," + myDirEntry + `]}`)
	id, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.True(t, ownsAny(t, blobs, project, id)[id])
}

// TestRunnerRestoredSnapshotIsComparedAtItsRootOnly: the project owns
// snapshot R and its directory x as trees alone (as the owners migration
// recorded roots: no rows below). A runner copy with no base yet, restored
// to R, answers a root whose x is R's x plus a file it sent: x's old file,
// which it never sent, has no row, so the snapshot is refused, as it is
// without a base. R is the base (its root's entries have rows), but only
// its root is compared with: compared with R's x, the old file would have
// been taken as owned.
func TestRunnerRestoredSnapshotIsComparedAtItsRootOnly(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	ctx := t.Context()
	file := func(name string, b []byte) string {
		return fmt.Sprintf(`{"name":%q,"type":"file","mode":420,"size":%d,"sha256":%q}`, name, len(b), environmenttest.Digest(b))
	}
	dir := func(name string, tree []byte) string {
		return fmt.Sprintf(`{"name":%q,"type":"dir","mode":493,"tree":%q}`, name, environmenttest.Digest(tree))
	}
	oldA, newB := []byte("old a, never sent"), []byte("new b")
	x := []byte(`{"v":1,"entries":[` + file("a.txt", oldA) + `]}`)
	r := []byte(`{"v":1,"entries":[` + dir("x", x) + `]}`)
	for _, b := range [][]byte{oldA, x, r} {
		require.NoError(t, blobs.Store.BlobPut(ctx, environmenttest.Digest(b), b))
	}
	require.NoError(t, blobs.Store.BlobOwnTrees(ctx, project, []string{environmenttest.Digest(r), environmenttest.Digest(x)}), "alone")

	x2 := []byte(`{"v":1,"entries":[` + file("a.txt", oldA) + "," + file("b.txt", newB) + `]}`)
	root := []byte(`{"v":1,"entries":[` + dir("x", x2) + `]}`)
	send := [][]byte{newB, x2}
	handlers := treeLiarHandlers(&send, &root)
	handlers[link.MethodSnapshotRestore] = func(*link.Conn, context.Context, *link.Request) (any, error) {
		return link.SnapshotResult{ID: environmenttest.Digest(r), Stats: json.RawMessage(`{}`)}, nil
	}
	env := liarEnv(t, rg, handlers)
	_, err := env.Restore(ctx, environmenttest.Digest(r))
	require.NoError(t, err)
	_, _, err = env.Snapshot(ctx)
	require.ErrorIs(t, err, snapshot.ErrNotOwned)
	require.Empty(t, ownsAny(t, blobs, project, environmenttest.Digest(root), environmenttest.Digest(x2), environmenttest.Digest(oldA)))
}

// TestRunnerCopyWithNoBaseAdoptsItsRestore: a runner copy with no base,
// restored to a snapshot, compares its next snapshot's root with it: after
// one file is added to a directory of 10, in 30, the root with the base,
// the directory's tree and its 11 files are asked about, not the root's
// 30 entries.
func TestRunnerCopyWithNoBaseAdoptsItsRestore(t *testing.T) {
	_, rg, owners := countedRig(t)
	ctx := t.Context()
	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_a", Session: "ses_a"})
	require.NoError(t, err)
	writeDirs(t, env)
	first, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, env.Close())

	env2, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_b", Session: "ses_b"})
	require.NoError(t, err)
	defer env2.Close()
	_, err = env2.Restore(ctx, first)
	require.NoError(t, err)
	require.NoError(t, env2.WriteFile(ctx, "d7/new.txt", []byte("changed")))
	asked := owners.asked.Load()
	_, _, err = env2.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2+1+11), owners.asked.Load()-asked)
}
