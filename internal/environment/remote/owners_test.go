package remote_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/environment/remote"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// foreignProject is a project other than the runners' of the rig.
const foreignProject = "other"

// serverBackend is the server's own machine's backend, which records the
// owners of the snapshots it takes in blobs' store.
func serverBackend(t *testing.T, blobs *environmenttest.Blobs) environment.Backend {
	t.Helper()
	spaces, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs.Store,
		Owners: blobs.Store, SocketDir: t.TempDir()})
	require.NoError(t, err)
	return b
}

// foreignSnapshot takes, on the server's own machine, a snapshot of a
// workspace of foreignProject holding files, and returns its id and its
// subtree "dir"'s digest: what a runner of another project may have
// learnt (snapshot ids are shown to that project's viewers).
func foreignSnapshot(t *testing.T, blobs *environmenttest.Blobs, files map[string]string) (id, dirTree string) {
	t.Helper()
	ctx := t.Context()
	env, err := serverBackend(t, blobs).Open(ctx, &environment.OpenParams{Workspace: "ses_foreign", Session: "ses_foreign", Project: foreignProject})
	require.NoError(t, err)
	defer env.Close()
	for name, content := range files {
		require.NoError(t, env.WriteFile(ctx, name, []byte(content)))
	}
	id, _, err = env.Snapshot(ctx)
	require.NoError(t, err)
	entries, err := snapshot.ListDir(ctx, blobs.Store, id, "")
	require.NoError(t, err)
	for _, e := range entries {
		if e.Path == "dir" {
			dirTree = e.SHA256
		}
	}
	return id, dirTree
}

// treeLiar connects a runner, "liar", whose every take sends the bytes of
// *send and of *root (as read at the take) and answers *root's digest, and
// returns an environment of it for session ses_mine.
func treeLiar(t *testing.T, rg *rig, send *[][]byte, root *[]byte) environment.Environment {
	t.Helper()
	return liarEnv(t, rg, treeLiarHandlers(send, root))
}

// treeLiarHandlers are treeLiar's runner's.
func treeLiarHandlers(send *[][]byte, root *[]byte) map[string]func(*link.Conn, context.Context, *link.Request) (any, error) {
	return liarEnvHandlers(func(c *link.Conn, ctx context.Context) (string, error) {
		for _, data := range append(slices.Clone(*send), *root) {
			err := c.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: environmenttest.Digest(data), Size: int64(len(data)), Data: data}, nil, nil)
			if err != nil {
				return "", err
			}
		}
		return environmenttest.Digest(*root), nil
	})
}

// liarEnv connects a runner, "liar", answering with handlers, and returns
// an environment of it for session ses_mine.
func liarEnv(t *testing.T, rg *rig, handlers map[string]func(*link.Conn, context.Context, *link.Request) (any, error)) environment.Environment {
	t.Helper()
	dialLiar(t, rg, "liar", handlers)
	b, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: "liar"})
	require.NoError(t, err)
	env, err := b.Open(t.Context(), &environment.OpenParams{Workspace: "ses_mine", Session: "ses_mine"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// ownsAny reports which of digests project owns.
func ownsAny(t *testing.T, blobs *environmenttest.Blobs, project string, digests ...string) map[string]bool {
	t.Helper()
	owned, err := blobs.Store.BlobsOwned(t.Context(), project, digests)
	require.NoError(t, err)
	return owned
}

// TestWrappedTreeRefused: a runner that knows another project's snapshot
// (or subtree, or file) digest F answers snapshot.take with a root of its
// own whose entry names F, and sends that root's bytes: refused, since it
// never sent F's (its project does not own F). Nothing is recorded as its
// project's, and a restore of its root is refused, so blob.get never
// reaches F. Sending the bytes of a file proves it holds them: the same
// wrapping of a file whose bytes it sent is accepted.
func TestWrappedTreeRefused(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	ctx := t.Context()
	secret := "the other project's secret"
	foreignID, foreignDir := foreignSnapshot(t, blobs, map[string]string{"secret.txt": secret, "dir/deep.txt": "deeper secret"})
	require.NotEmpty(t, foreignDir)
	secretDigest := environmenttest.Digest([]byte(secret))

	var root []byte
	var alsoSend [][]byte
	env := treeLiar(t, rg, &alsoSend, &root)

	for name, entry := range map[string]string{
		"the other project's root as a directory": fmt.Sprintf(`{"name":"x","type":"dir","mode":493,"tree":%q}`, foreignID),
		"its subtree as a directory":              fmt.Sprintf(`{"name":"x","type":"dir","mode":493,"tree":%q}`, foreignDir),
		"its file's content":                      fmt.Sprintf(`{"name":"x","type":"file","mode":420,"size":%d,"sha256":%q}`, len(secret), secretDigest),
	} {
		root = []byte(`{"v":1,"entries":[` + entry + `]}`)
		_, _, err := env.Snapshot(ctx)
		require.ErrorIs(t, err, snapshot.ErrNotOwned, name)
		rootID := environmenttest.Digest(root)
		// The runner's proof of its own root is recorded (it sent those
		// bytes) only with what the root reaches: not at all.
		require.Empty(t, ownsAny(t, blobs, project, rootID, foreignID, foreignDir, secretDigest), name)
		_, err = env.Restore(ctx, rootID)
		require.ErrorIs(t, err, snapshot.ErrNotOwned, "%s: restored", name)
	}

	// The file's bytes sent: the runner holds them, its snapshot is
	// accepted and its project owns them from then on.
	root = []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"x","type":"file","mode":420,"size":%d,"sha256":%q}]}`, len(secret), secretDigest))
	alsoSend = [][]byte{[]byte(secret)}
	id, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, environmenttest.Digest(root), id)
	require.Equal(t, map[string]bool{id: true, secretDigest: true}, ownsAny(t, blobs, project, id, secretDigest, foreignID))
}

// TestBlobHasIsNoOracle: blob.has answers "missing" for a blob the
// runner's project does not own, stored or not: it cannot test whether
// another project holds some content. Once its project owns the blob (its
// own snapshot holds the same bytes), it is not missing.
func TestBlobHasIsNoOracle(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	ctx := t.Context()
	secret := "guess me: 4417"
	foreignID, _ := foreignSnapshot(t, blobs, map[string]string{"secret.txt": secret})
	secretDigest := environmenttest.Digest([]byte(secret))
	has, err := blobs.BlobHas(ctx, secretDigest)
	require.NoError(t, err)
	require.True(t, has, "the server stores the other project's file")

	liar, r := dialAsRunner(t, rg, "liar")
	_, end := hub.AllowTake(r, 0)
	var res link.BlobHasResult
	require.NoError(t, liar.Call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: []string{secretDigest, foreignID}}, &res, nil))
	require.Equal(t, []string{secretDigest, foreignID}, res.Missing, "another project's blobs are missing to this runner")
	end()

	// The project's own snapshot of the same content, through the real
	// runner: it sends the bytes, and owns them from then on.
	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_mine", Session: "ses_mine"})
	require.NoError(t, err)
	defer env.Close()
	require.NoError(t, env.WriteFile(ctx, "same.txt", []byte(secret)))
	_, _, err = env.Snapshot(ctx)
	require.NoError(t, err)
	_, end = hub.AllowTake(r, 0)
	defer end()
	require.NoError(t, liar.Call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: []string{secretDigest, foreignID}}, &res, nil))
	require.Equal(t, []string{foreignID}, res.Missing)
}

// TestRestoreOfForeignSnapshotRefused: a restore of a snapshot the
// project does not own is refused before the runner is asked anything,
// so blob.get never reaches it; on the server's own machine too (a fork
// or a recreated workspace restore through it).
func TestRestoreOfForeignSnapshotRefused(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	ctx := t.Context()
	foreignID, _ := foreignSnapshot(t, blobs, map[string]string{"secret.txt": "restore me"})

	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_mine", Session: "ses_mine"})
	require.NoError(t, err)
	defer env.Close()
	_, err = env.Restore(ctx, foreignID)
	require.ErrorIs(t, err, snapshot.ErrNotOwned)
	require.Zero(t, blobs.Gets(foreignID), "nothing was fetched")
	_, err = env.ReadFile(ctx, "secret.txt", 0, 100)
	require.Error(t, err, "the file did not reach the runner's workspace")

	liar, r := dialAsRunner(t, rg, "liar")
	_, err = hub.AllowRestore(ctx, r, foreignID)
	require.ErrorIs(t, err, snapshot.ErrNotOwned)
	_, err = getBlob(t, liar, foreignID)
	requireCode(t, err, link.CodeNotFound)

	local := serverBackend(t, blobs)
	lenv, err := local.Open(ctx, &environment.OpenParams{Workspace: "ses_fork", Session: "ses_fork", Project: project})
	require.NoError(t, err)
	defer lenv.Close()
	_, err = lenv.Restore(ctx, foreignID)
	require.ErrorIs(t, err, snapshot.ErrNotOwned)
	_, err = lenv.ReadFile(ctx, "secret.txt", 0, 100)
	require.Error(t, err)
	// The project that owns it restores it.
	oenv, err := local.Open(ctx, &environment.OpenParams{Workspace: "ses_other_fork", Session: "ses_other_fork", Project: foreignProject})
	require.NoError(t, err)
	defer oenv.Close()
	_, err = oenv.Restore(ctx, foreignID)
	require.NoError(t, err)
}

// TestFileThatParsesAsATreeStandsForNothing: a file's bytes are owned for
// themselves, whatever they look like. A runner that first snapshots a
// file whose bytes R parse as a tree naming another project's subtree
// (accepted: it sent R's bytes, as a file) and then names R as a
// snapshot, or as a directory of one, is refused: R is read as a tree
// then, and what it names is not its project's. A restore of R is
// refused too. The same file written on the server's own machine (by a
// model) gives R no more.
func TestFileThatParsesAsATreeStandsForNothing(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	ctx := t.Context()
	foreignID, foreignDir := foreignSnapshot(t, blobs, map[string]string{"dir/deep.txt": "deeper secret"})
	require.NotEmpty(t, foreignDir)
	fake := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"x","type":"dir","mode":493,"tree":%q}]}`, foreignDir))
	fakeID := environmenttest.Digest(fake)

	var send [][]byte
	var answer string
	dialLiar(t, rg, "liar", liarEnvHandlers(func(c *link.Conn, ctx context.Context) (string, error) {
		for _, data := range send {
			err := c.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: environmenttest.Digest(data), Size: int64(len(data)), Data: data}, nil, nil)
			if err != nil {
				return "", err
			}
		}
		return answer, nil
	}))
	b, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: "liar"})
	require.NoError(t, err)
	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_mine", Session: "ses_mine"})
	require.NoError(t, err)
	defer env.Close()

	// A snapshot holding R as a file's bytes: accepted, R owned for itself.
	root := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"f","type":"file","mode":420,"size":%d,"sha256":%q}]}`, len(fake), fakeID))
	send, answer = [][]byte{fake, root}, environmenttest.Digest(root)
	_, _, err = env.Snapshot(ctx)
	require.NoError(t, err)
	require.True(t, ownsAny(t, blobs, project, fakeID)[fakeID])
	kinds, err := blobs.Store.BlobOwnership(ctx, project, []string{fakeID})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{fakeID: false}, kinds, "a file's bytes are owned for themselves, not as a tree")

	// R named as the snapshot, not sent again: refused.
	send, answer = nil, fakeID
	_, _, err = env.Snapshot(ctx)
	require.ErrorIs(t, err, snapshot.ErrNotOwned, "R as the snapshot")
	// R as a directory of a root the runner sends: refused.
	wrap := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"d","type":"dir","mode":493,"tree":%q}]}`, fakeID))
	send, answer = [][]byte{wrap}, environmenttest.Digest(wrap)
	_, _, err = env.Snapshot(ctx)
	require.ErrorIs(t, err, snapshot.ErrNotOwned, "R as a directory")

	_, err = env.Restore(ctx, fakeID)
	require.ErrorIs(t, err, snapshot.ErrNotOwned, "a restore of R")
	require.Empty(t, ownsAny(t, blobs, project, foreignID, foreignDir), "nothing of the other project's became this one's")
	liar, r := dialAsRunner(t, rg, "liar2")
	_, err = hub.AllowRestore(ctx, r, fakeID)
	require.ErrorIs(t, err, snapshot.ErrNotOwned)
	_, err = getBlob(t, liar, foreignDir)
	requireCode(t, err, link.CodeNotFound)

	// On the server's own machine: a model writes R into a file; R is the
	// project's for itself only, and a restore of R is refused.
	lenv, err := serverBackend(t, blobs).Open(ctx, &environment.OpenParams{Workspace: "ses_local", Session: "ses_local", Project: project})
	require.NoError(t, err)
	defer lenv.Close()
	require.NoError(t, lenv.WriteFile(ctx, "fake.json", fake))
	_, _, err = lenv.Snapshot(ctx)
	require.NoError(t, err)
	_, err = lenv.Restore(ctx, fakeID)
	require.ErrorIs(t, err, snapshot.ErrNotOwned, "a restore of R on the server's machine")
	require.Empty(t, ownsAny(t, blobs, project, foreignID, foreignDir))
}

// gatedOwners holds the first BlobOwn of digest until release is
// closed, telling held when it waits; the later ones pass.
type gatedOwners struct {
	hub.OwnerStore
	digest        string
	first         atomic.Bool
	held, release chan struct{}
}

func (g *gatedOwners) BlobOwn(ctx context.Context, project string, digests []string) error {
	if slices.Contains(digests, g.digest) && g.first.CompareAndSwap(false, true) {
		close(g.held)
		<-g.release
	}
	return g.OwnerStore.BlobOwn(ctx, project, digests)
}

// TestProofsOutliveTheTakeThatGotThem: two snapshots of one runner
// overlap (a root and its sub-agent share a workspace). Take A sends a
// file's bytes and answers a root that does not reach it (a walk that
// started again); while its end records the file as the project's, take
// B sends a tree naming the file (its cache knows the file as sent) and
// ends too. Both are the project's by then (the proofs are the
// connection's: B's end records the file too), so that a later snapshot
// naming the tree without sending it again (the runner's cache knows it
// as sent) is accepted. Before, a take's proofs were its own: B's end
// found the file not recorded yet, and the tree's proof died with take
// B. CI met that race in the conformance suite's shared workspace ("the
// blob is not the project's").
func TestProofsOutliveTheTakeThatGotThem(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	file := []byte("shared by two takes")
	fileDigest := environmenttest.Digest(file)
	gate := &gatedOwners{digest: fileDigest, held: make(chan struct{}), release: make(chan struct{})}
	rg := newRig(t, blobs, rigOptions{owners: func(o hub.OwnerStore) hub.OwnerStore { gate.OwnerStore = o; return gate }})
	ctx := t.Context()
	dir := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"f","type":"file","mode":420,"size":%d,"sha256":%q}]}`, len(file), fileDigest))
	dirDigest := environmenttest.Digest(dir)
	put := func(c *link.Conn, ctx context.Context, data []byte) error {
		return c.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: environmenttest.Digest(data), Size: int64(len(data)), Data: data}, nil, nil)
	}
	empty := []byte(`{"v":1,"entries":[]}`)
	takes := map[string]func(c *link.Conn, ctx context.Context) (string, error){
		"a": func(c *link.Conn, ctx context.Context) (string, error) {
			if err := put(c, ctx, file); err != nil {
				return "", err
			}
			return environmenttest.Digest(empty), put(c, ctx, empty)
		},
		"b": func(c *link.Conn, ctx context.Context) (string, error) {
			if err := put(c, ctx, dir); err != nil {
				return "", err
			}
			return environmenttest.Digest(empty), put(c, ctx, empty)
		},
		"b again": func(c *link.Conn, ctx context.Context) (string, error) {
			root := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"d","type":"dir","mode":493,"tree":%q}]}`, dirDigest))
			return environmenttest.Digest(root), put(c, ctx, root)
		},
	}
	next := make(chan string, 1)
	dialLiar(t, rg, "liar", liarEnvHandlers(func(c *link.Conn, ctx context.Context) (string, error) { return takes[<-next](c, ctx) }))
	b, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: "liar"})
	require.NoError(t, err)
	envA, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_root", Session: "ses_root"})
	require.NoError(t, err)
	defer envA.Close()
	envB, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_root", Session: "ses_child"})
	require.NoError(t, err)
	defer envB.Close()

	next <- "a"
	errA := make(chan error, 1)
	go func() { _, _, err := envA.Snapshot(ctx); errA <- err }()
	<-gate.held // A's end is recording the file
	next <- "b"
	_, _, err = envB.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{dirDigest: true, fileDigest: true}, ownsAny(t, blobs, project, dirDigest, fileDigest),
		"B's end records A's proof too")
	close(gate.release)
	require.NoError(t, <-errA)
	next <- "b again"
	_, _, err = envB.Snapshot(ctx)
	require.NoError(t, err, "a tree the runner sent, naming a file it sent, is its project's")
}
