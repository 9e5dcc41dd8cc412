package remote_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// dialAsRunner connects to rg's hub as a runner named name that answers
// nothing: a runner built to lie, calling the server's methods itself.
func dialAsRunner(t *testing.T, rg *rig, name string) (*link.Conn, *hub.Runner) {
	t.Helper()
	c := dialLiar(t, rg, name, map[string]func(*link.Conn, context.Context, *link.Request) (any, error){
		"none": func(*link.Conn, context.Context, *link.Request) (any, error) { return nil, nil },
	})
	r, _ := rg.hub.Get(project, name)
	return c, r
}

func requireCode(t *testing.T, err error, code string) {
	t.Helper()
	var re *link.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, code, re.Code, re.Message)
}

// getBlob calls blob.get as the runner does.
func getBlob(t *testing.T, c *link.Conn, digest string) ([]byte, error) {
	var data []byte
	err := c.Call(t.Context(), link.MethodBlobGet, link.BlobGetParams{Digest: digest}, nil, &link.CallOptions{OnOutput: func(_ string, b []byte) {
		data = append(data, b...)
	}})
	return data, err
}

// TestBlobGetOnlyWhatARestoreReaches: a runner reads only the blobs of a
// snapshot the server asked it to restore, and only while it restores:
// another session's blob, which the server holds, is refused whatever
// its digest. Puts are checked against their digest.
func TestBlobGetOnlyWhatARestoreReaches(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	ctx := t.Context()

	// Another session's snapshot, taken through the real runner.
	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_other", Session: "ses_other"})
	require.NoError(t, err)
	defer env.Close()
	secret := []byte("another session's file")
	require.NoError(t, env.WriteFile(ctx, "secret.txt", secret))
	otherID, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, env.WriteFile(ctx, "dir/mine.txt", []byte("this session's file")))
	mineID, _, err := env.Snapshot(ctx)
	require.NoError(t, err)

	liar, r := dialAsRunner(t, rg, "liar")
	for _, d := range []string{otherID, environmenttest.Digest(secret), mineID} {
		_, err := getBlob(t, liar, d)
		requireCode(t, err, link.CodeNotFound)
	}

	// The server restores mineID on this runner: what it reaches, tree by
	// tree, and nothing else.
	end, err := hub.AllowRestore(ctx, r, mineID)
	require.NoError(t, err)
	root, err := getBlob(t, liar, mineID)
	require.NoError(t, err)
	require.Equal(t, mineID, environmenttest.Digest(root))
	_, err = getBlob(t, liar, environmenttest.Digest([]byte("this session's file")))
	requireCode(t, err, link.CodeNotFound) // in a subtree not fetched yet
	require.Contains(t, string(root), `"name":"dir"`)
	// secret.txt is in mineID too (same workspace): reachable. otherID's
	// root is not.
	_, err = getBlob(t, liar, environmenttest.Digest(secret))
	require.NoError(t, err)
	_, err = getBlob(t, liar, otherID)
	requireCode(t, err, link.CodeNotFound)
	end()
	_, err = getBlob(t, liar, mineID)
	requireCode(t, err, link.CodeNotFound) // the restore is over

	// Puts and has: only while the server has the runner take a snapshot.
	data := []byte("a new blob")
	put := link.BlobPutParams{Digest: environmenttest.Digest(data), Size: int64(len(data)), Data: data}
	requireCode(t, liar.Call(ctx, link.MethodBlobPut, put, nil, nil), link.CodeBadParams)
	requireCode(t, liar.Call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: []string{put.Digest}}, nil, nil), link.CodeBadParams)
	sent, endTake := hub.AllowTake(r, 0)
	defer endTake()

	// Puts: the digest is checked; what is stored is never overwritten.
	requireCode(t, liar.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: environmenttest.Digest([]byte("a")), Size: 1, Data: []byte("b")}, nil, nil), link.CodeBadParams)
	require.False(t, sent(put.Digest))
	require.NoError(t, liar.Call(ctx, link.MethodBlobPut, put, nil, nil))
	require.True(t, sent(put.Digest), "the runner proved it holds the blob")
	has, err := blobs.BlobHas(ctx, environmenttest.Digest(data))
	require.NoError(t, err)
	require.True(t, has)
	// Has: a blob the project owns (in its snapshot) is not missing; one
	// stored but not the project's (put in a take whose snapshot was not
	// accepted yet) is, like one never stored: the runner sends it again.
	var missing link.BlobHasResult
	require.NoError(t, liar.Call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: []string{environmenttest.Digest(secret), environmenttest.Digest(data), environmenttest.Digest([]byte("never"))}}, &missing, nil))
	require.Equal(t, []string{environmenttest.Digest(data), environmenttest.Digest([]byte("never"))}, missing.Missing)
	requireCode(t, liar.Call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: []string{"../x"}}, nil, nil), link.CodeBadParams)
}

// recorder relays TCP connections to a server and keeps every byte the
// server sent: what a runner behind it received.
type recorder struct {
	mu       sync.Mutex
	received bytes.Buffer
}

func (rec *recorder) Write(b []byte) (int, error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.received.Write(b)
}

func (rec *recorder) String() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.received.String()
}

// relay listens on loopback and relays to the host of serverURL; it
// returns the URL to dial instead.
func (rec *recorder) relay(t testing.TB, serverURL string) string {
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(io.MultiWriter(c, rec), up); _ = c.Close() }()
		}
	}()
	u.Host = ln.Addr().String()
	return u.String()
}

// TestNoSecretReachesTheRunner: what the server holds never crosses to
// the runner: the keys and URLs of the server process's environment (what
// a careless implementation would forward with a command's or a
// program's environment) and another project's files in the server's
// blob store (what a too-wide blob.get would hand out). A session uses its
// environment through every call the server makes of a runner (each
// checked to have crossed, and blob.get to have served a restore); every
// byte the runner received is scanned, base64 payloads decoded, while what
// must cross (a file's content, the control plane's address) is seen.
func TestNoSecretReachesTheRunner(t *testing.T) {
	secrets := map[string]string{
		"LONGHAUL_DATABASE_URL": "postgres://longhaul:db-pass-5c1e9a@db.internal:5432/longhaul",
		"ANTHROPIC_API_KEY":     "sk-ant-model-key-8d2f61",
		"LONGHAUL_VAULT_KEY":    "vault-master-key-3b7e04",
		"LONGHAUL_SIGNING_KEY":  "server-signing-key-a9c2d7",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	rec := &recorder{}
	blobs := environmenttest.NewBlobs(t)
	ctx := t.Context()
	// Another project's file, in the server's store of blobs.
	foreign := []byte("other-project-secret-e4b19c")
	require.NoError(t, blobs.BlobPut(ctx, environmenttest.Digest(foreign), foreign))
	secrets["another project's file"] = string(foreign)

	rg := newRig(t, blobs, rigOptions{dial: func(u string) string { return rec.relay(t, u) }})
	b := rg.backend(t)
	b.ConfinesNetwork() // runner.info
	cp := &egress.ControlPlane{}
	require.NoError(t, cp.Add("api", "the server's API", "127.0.0.1:8089"))
	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_s", Session: "ses_s",
		Network: &environment.Network{Allow: []string{"example.com"}, ControlPlane: cp, OnEvent: func(tool.NetworkEvent) {}}})
	require.NoError(t, err)
	defer env.Close()

	res, err := env.Run(ctx, &tool.ExecRequest{Command: "env; echo made-by-a-command-0c3d > made.txt; echo done", Env: map[string]string{"LONGHAUL_SESSION_ID": "ses_s"}})
	require.NoError(t, err)
	require.Contains(t, res.Stdout, "done")
	require.NoError(t, env.WriteFile(ctx, "notes.md", []byte("crossing-marker-41f0")))
	big := bytes.Repeat([]byte("large-file-"), 200_000) // over a frame: parts both ways
	require.NoError(t, env.WriteFile(ctx, "big.bin", big))
	got, err := env.ReadFile(ctx, "big.bin", 0, int64(len(big)))
	require.NoError(t, err)
	require.Equal(t, big, got.Data)
	_, err = env.List(ctx, ".", 100)
	require.NoError(t, err)
	require.NoError(t, env.WriteFile(ctx, "gone.txt", []byte("x")))
	require.NoError(t, env.Remove(ctx, "gone.txt"))
	require.NoError(t, env.WriteFileDirect(ctx, "person.txt", []byte("x")))
	en, err := env.StatDirect(ctx, "person.txt")
	require.NoError(t, err)
	require.Equal(t, workspace.EntryFile, en.Type)

	p, err := env.Start(ctx, &sandbox.StartRequest{Command: "cat"})
	require.NoError(t, err)
	_, err = p.Stdin().Write([]byte("echo-marker-77aa\n"))
	require.NoError(t, err)
	require.NoError(t, p.Stdin().Close())
	<-p.Done()
	p, err = env.Start(ctx, &sandbox.StartRequest{Command: "exec sleep 600"})
	require.NoError(t, err)
	p.Kill()
	<-p.Done()

	id, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	held, err := env.Holds(ctx, id)
	require.NoError(t, err)
	require.True(t, held)
	_, err = env.Restore(ctx, id)
	require.NoError(t, err)
	require.NoError(t, env.Stop(ctx, id))

	// A restore into another workspace, the runner's blob cache emptied:
	// the blobs come from the server (blob.get).
	require.NoError(t, os.RemoveAll(filepath.Join(rg.data, "blobs")))
	env2, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_fork", Session: "ses_fork"})
	require.NoError(t, err)
	_, err = env2.Restore(ctx, id)
	require.NoError(t, err)
	require.Positive(t, blobs.Gets(environmenttest.Digest([]byte("made-by-a-command-0c3d\n"))), "the restore fetched the blobs")
	require.NoError(t, env2.Close())

	received := rec.String()
	for _, m := range []string{link.MethodRunnerInfo, link.MethodEnvOpen, link.MethodExec, link.MethodFSWrite, link.MethodFSRead,
		link.MethodFSList, link.MethodFSRemove, link.MethodFSStatDirect, link.MethodProcessStart, link.MethodProcessWait, link.MethodProcessWrite,
		link.MethodProcessCloseStdin, link.MethodProcessStop, link.MethodSnapshotTake, link.MethodSnapshotHolds,
		link.MethodSnapshotRestore, link.MethodEnvStop, link.MethodEnvClose} {
		require.Contains(t, received, `"method":"`+m+`"`, "the session made no %s call", m)
	}
	// File contents, blobs and stdin travel base64 encoded: scan them
	// decoded too.
	for _, m := range regexp.MustCompile(`"data":"([A-Za-z0-9+/=]+)"`).FindAllStringSubmatch(received, -1) {
		b, err := base64.StdEncoding.DecodeString(m[1])
		require.NoError(t, err)
		received += "\n" + string(b)
	}
	require.Contains(t, received, "crossing-marker-41f0", "the recording sees the frames in the clear")
	require.Contains(t, received, "echo-marker-77aa")
	require.Contains(t, received, "made-by-a-command-0c3d", "the blobs the restore fetched are scanned")
	require.Contains(t, received, "127.0.0.1:8089", "the control plane's address crosses")
	for name, v := range secrets {
		require.NotContains(t, received, v, "%s reached the runner", name)
		require.False(t, strings.Contains(received, v[len(v)/2:]), "part of %s reached the runner", name)
	}
}
