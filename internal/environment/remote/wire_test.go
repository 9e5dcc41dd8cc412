package remote_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/runner"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// dialAsRunner connects to rg's hub as a runner named name that answers
// nothing: a runner built to lie, calling the server's methods itself.
func dialAsRunner(t *testing.T, rg *rig, name string) (*link.Conn, *hub.Runner) {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), rg.url+runner.ConnectPath, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer good"}}})
	require.NoError(t, err)
	require.NoError(t, link.WriteJSON(t.Context(), ws, link.Hello{Name: name, Capacity: 1}))
	var welcome link.Welcome
	require.NoError(t, link.ReadJSON(t.Context(), ws, &welcome))
	c := link.New(ws, &link.Config{Handlers: map[string]link.Handler{"none": nil}})
	t.Cleanup(func() { c.Close("test over"); <-c.Done() })
	var r *hub.Runner
	require.Eventually(t, func() bool { var ok bool; r, ok = rg.hub.Get(project, name); return ok }, 10*time.Second, time.Millisecond)
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
	end := hub.AllowRestore(r, mineID)
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
	var missing link.BlobHasResult
	require.NoError(t, liar.Call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: []string{environmenttest.Digest(data), environmenttest.Digest([]byte("never"))}}, &missing, nil))
	require.Equal(t, []string{environmenttest.Digest([]byte("never"))}, missing.Missing)
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

// TestNoSecretReachesTheRunner: what the server holds (keys, the vault's
// values, the database URL: here in the server process's environment)
// never crosses to the runner. The runner's received bytes, over a
// session's whole life (open with network, commands, files, snapshot,
// restore, a long-lived program), hold none of them, while they do hold
// what must cross (a file's content, the control plane's address).
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
	rg := newRig(t, blobs, rigOptions{dial: func(u string) string { return rec.relay(t, u) }})
	ctx := t.Context()
	cp := &egress.ControlPlane{}
	require.NoError(t, cp.Add("api", "the server's API", "127.0.0.1:8089"))
	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_s", Session: "ses_s",
		Network: &environment.Network{Allow: []string{"example.com"}, ControlPlane: cp, OnEvent: func(tool.NetworkEvent) {}}})
	require.NoError(t, err)
	defer env.Close()
	res, err := env.Run(ctx, &tool.ExecRequest{Command: "env; echo done", Env: map[string]string{"LONGHAUL_SESSION_ID": "ses_s"}})
	require.NoError(t, err)
	require.Contains(t, res.Stdout, "done")
	require.NoError(t, env.WriteFile(ctx, "notes.md", []byte("crossing-marker-41f0")))
	id, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	_, err = env.Restore(ctx, id)
	require.NoError(t, err)
	p, err := env.Start(ctx, &sandbox.StartRequest{Command: "cat"})
	require.NoError(t, err)
	_, err = p.Stdin().Write([]byte("echo-marker-77aa\n"))
	require.NoError(t, err)
	p.Kill()
	<-p.Done()

	received := rec.String()
	// File contents and stdin travel base64 encoded: scan them decoded too.
	for _, m := range regexp.MustCompile(`"data":"([A-Za-z0-9+/=]+)"`).FindAllStringSubmatch(received, -1) {
		b, err := base64.StdEncoding.DecodeString(m[1])
		require.NoError(t, err)
		received += "\n" + string(b)
	}
	require.Contains(t, received, "crossing-marker-41f0", "the recording sees the frames in the clear")
	require.Contains(t, received, "echo-marker-77aa")
	require.Contains(t, received, "127.0.0.1:8089", "the control plane's address crosses")
	for name, v := range secrets {
		require.NotContains(t, received, v, "%s reached the runner", name)
		require.False(t, strings.Contains(received, v[len(v)/2:]), "part of %s reached the runner", name)
	}
}
