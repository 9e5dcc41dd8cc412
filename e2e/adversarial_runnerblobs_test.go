package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// hostileRunner is a runner of its own making, speaking the runner
// protocol through the real server's route with a runner key: it
// answers the server's calls, snapshot.take as its take function says,
// and keeps the snapshots the server asked it to restore.
type hostileRunner struct {
	mu       sync.Mutex
	restores []string
}

// dialHostileRunner connects as runner name with key; take answers each
// snapshot.take (its number from 1) over the connection.
func dialHostileRunner(t *testing.T, srv *server, key, name string, take func(ctx context.Context, c *link.Conn, n int) (string, error)) *hostileRunner {
	t.Helper()
	return dialHostileRunnerWith(t, srv, key, name, take, nil)
}

// dialHostileRunnerWith is dialHostileRunner with some of its answers
// replaced: override's handlers, by method, take the place of its own.
func dialHostileRunnerWith(t *testing.T, srv *server, key, name string, take func(ctx context.Context, c *link.Conn, n int) (string, error), override map[string]link.Handler) *hostileRunner {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, srv.url+"/v1/runners/connect", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	require.NoError(t, err)
	require.NoError(t, link.WriteJSON(ctx, ws, link.Hello{Name: name, Capacity: 4, Version: "hostile", Protocol: link.ProtocolVersion}))
	var welcome link.Welcome
	require.NoError(t, link.ReadJSON(ctx, ws, &welcome))
	h := &hostileRunner{}
	ready := make(chan *link.Conn, 1)
	var takes int
	handlers := map[string]link.Handler{
		link.MethodRunnerInfo: func(context.Context, *link.Request) (any, error) { return link.RunnerInfo{Sandbox: "local"}, nil },
		link.MethodEnvOpen: func(context.Context, *link.Request) (any, error) {
			return link.EnvOpenResult{Provisioned: true, Backend: "hostile"}, nil
		},
		link.MethodEnvClaim: func(context.Context, *link.Request) (any, error) { return nil, nil },
		link.MethodEnvClose: func(context.Context, *link.Request) (any, error) { return nil, nil },
		// It holds what it took (one that denies it, with restores that
		// do nothing: TestAdversarialRunners_RestoreDoesNothing).
		link.MethodSnapshotHolds: func(context.Context, *link.Request) (any, error) { return true, nil },
		link.MethodExec:          func(context.Context, *link.Request) (any, error) { return link.ExecResult{}, nil },
		link.MethodSnapshotRestore: func(_ context.Context, req *link.Request) (any, error) {
			var p link.SnapshotParams
			_ = req.DecodeParams(&p)
			h.mu.Lock()
			h.restores = append(h.restores, p.Snapshot)
			h.mu.Unlock()
			return link.SnapshotResult{Stats: json.RawMessage(`{}`)}, nil
		},
		link.MethodSnapshotTake: func(ctx context.Context, _ *link.Request) (any, error) {
			c := <-ready
			ready <- c
			h.mu.Lock()
			takes++
			n := takes
			h.mu.Unlock()
			id, err := take(ctx, c, n)
			if err != nil {
				return nil, err
			}
			return link.SnapshotResult{ID: id, Stats: json.RawMessage(`{}`)}, nil
		},
	}
	maps.Copy(handlers, override)
	c := link.New(ws, &link.Config{Handlers: handlers})
	ready <- c
	t.Cleanup(func() { c.Close("test over"); <-c.Done() })
	return h
}

// twoShellStepsOn creates a session of the default project on runner name:
// two steps of a shell call each (a checkpoint after each), then an
// answer.
func twoShellStepsOn(t *testing.T, admin *client.Client, name string) *lt.Session {
	t.Helper()
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "true"}}}},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "true"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	s, err := admin.CreateSession(t.Context(), &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Tools: []lt.ToolSpec{{Name: "shell"}},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: name}},
	}})
	require.NoError(t, err)
	return s
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// putBlobs sends blobs whole, one blob.put each, as a runner does during
// a take.
func putBlobs(ctx context.Context, c *link.Conn, blobs ...[]byte) error {
	for _, data := range blobs {
		if err := c.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: digestOf(data), Size: int64(len(data)), Data: data}, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// TestAdversarialRunners_WrappedTree: a hostile runner of project beta
// knows the snapshot id of a checkpoint of project alpha (shown to alpha's
// viewers) and the digest of a file in it. Answering a beta session's
// snapshot.take, it wraps them in a root tree of its own (a directory
// entry naming alpha's root, then a file entry naming alpha's file) and
// sends that root's bytes. The server refuses both snapshots: beta's
// checkpoints say why and journal no snapshot, so nothing restores or
// forks alpha's files into beta. While it takes, blob.has calls alpha's
// blobs missing (no oracle) and blob.get refuses them.
func TestAdversarialRunners_WrappedTree(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-wrapped-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()

	foreignID, betaKey := alphaSecretAndBetaRunnerKey(t, k, admin, boot)
	secret := "alpha-secret-6f1d2a\n"
	secretDigest := digestOf([]byte(secret))
	type probe struct {
		root    string
		missing []string
		getErr  error
	}
	var (
		pmu    sync.Mutex
		probes []probe
	)
	hostile := dialHostileRunner(t, k.srv, betaKey.Key, "evil", func(ctx context.Context, c *link.Conn, n int) (string, error) {
		// What does the server hold? Is it mine to read?
		var has link.BlobHasResult
		if err := c.Call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: []string{foreignID, secretDigest}}, &has, nil); err != nil {
			return "", err
		}
		getErr := c.Call(ctx, link.MethodBlobGet, link.BlobGetParams{Digest: foreignID}, nil, &link.CallOptions{OnOutput: func(string, []byte) {}})
		entry := fmt.Sprintf(`{"name":"loot","type":"dir","mode":493,"tree":%q}`, foreignID)
		if n > 1 {
			entry = fmt.Sprintf(`{"name":"loot.txt","type":"file","mode":420,"size":%d,"sha256":%q}`, len(secret), secretDigest)
		}
		root := []byte(`{"v":1,"entries":[` + entry + `]}`)
		pmu.Lock()
		probes = append(probes, probe{root: digestOf(root), missing: has.Missing, getErr: getErr})
		pmu.Unlock()
		return digestOf(root), putBlobs(ctx, c, root)
	})

	// A beta session on that runner, two steps: a checkpoint after each.
	beta := runBetaOnEvil(t, admin, 2)

	pmu.Lock()
	defer pmu.Unlock()
	require.GreaterOrEqual(t, len(probes), 2, "both wrappings were tried")
	refused := map[string]bool{}
	for _, p := range probes {
		refused[p.root] = true
		require.ElementsMatch(t, []string{foreignID, secretDigest}, p.missing, "blob.has told the hostile runner that alpha's blobs exist")
		var re *link.RemoteError
		require.ErrorAs(t, p.getErr, &re, "blob.get handed out alpha's root")
		require.Equal(t, link.CodeNotFound, re.Code)
	}
	cps, err := admin.ListCheckpoints(ctx, beta.ID)
	require.NoError(t, err)
	require.NotEmpty(t, cps.Data)
	for _, c := range cps.Data {
		require.False(t, refused[c.Snapshot], "checkpoint %s journaled the wrapped snapshot %s", c.ID, c.Snapshot)
		require.Equal(t, "", c.Snapshot, "checkpoint %s", c.ID)
		require.Contains(t, c.SnapshotError, "not the project's", "checkpoint %s says why", c.ID)
	}
	hostile.mu.Lock()
	require.Empty(t, hostile.restores, "the server asked the hostile runner to restore something")
	hostile.mu.Unlock()

}

// alphaSecretAndBetaRunnerKey makes a checkpoint of a session of project
// alpha holding one secret file, on the server's node, and a runner key of
// project beta: it returns the checkpoint's snapshot id and the key.
func alphaSecretAndBetaRunnerKey(t *testing.T, k *keyed, admin *client.Client, boot string) (string, lt.APIKey) {
	t.Helper()
	ctx := t.Context()
	alphaScript, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": `printf 'alpha-secret-6f1d2a\n' > secret.txt`}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	alpha, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", Project: "alpha", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: alphaScript}, Tools: []lt.ToolSpec{{Name: "shell"}},
	}})
	require.NoError(t, err)
	var foreignID string
	require.Eventually(t, func() bool {
		l, err := admin.ListCheckpoints(ctx, alpha.ID)
		if err != nil {
			return false
		}
		for _, c := range l.Data {
			if c.Snapshot != "" && c.Files == 1 {
				foreignID = c.Snapshot
			}
		}
		return foreignID != ""
	}, time.Minute, 10*time.Millisecond, "alpha's checkpoint with its secret")
	r := k.send(boot, http.MethodPost, "/v1/keys", `{"name":"beta-runner","role":"runner","project":"beta"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var betaKey lt.APIKey
	require.NoError(t, json.Unmarshal(r.body, &betaKey))
	return foreignID, betaKey
}

// runBetaOnEvil runs a session of project beta on the runner "evil",
// steps shell calls (a checkpoint after each) and an answer, and returns it
// once its turn ended.
func runBetaOnEvil(t *testing.T, admin *client.Client, steps int) *lt.Session {
	t.Helper()
	ctx := t.Context()
	var script []map[string]any
	for range steps {
		script = append(script, map[string]any{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "true"}}}})
	}
	betaScript, err := json.Marshal(append(script, map[string]any{"text": "done"}))
	require.NoError(t, err)
	beta, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", Project: "beta", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: betaScript}, Tools: []lt.ToolSpec{{Name: "shell"}},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "evil"}},
	}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := admin.GetSession(ctx, beta.ID)
		return err == nil && s.Status == lt.SessionIdle
	}, time.Minute, 10*time.Millisecond, "the beta session ends its turn")
	return beta
}

// TestAdversarialRunners_FileAsTree: a hostile runner of project beta
// first snapshots a file whose bytes R parse as a tree naming alpha's
// snapshot (accepted: it sent R, as a file's bytes), then answers the
// next take with R itself as the snapshot, not sent again, and the one
// after with a root naming R as a directory. Both are refused: a file's
// bytes are owned for themselves, and read as a tree R names what beta
// does not own. No checkpoint journals R, and nothing is restored.
func TestAdversarialRunners_FileAsTree(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-fileastree-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	foreignID, betaKey := alphaSecretAndBetaRunnerKey(t, k, admin, boot)
	fake := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"loot","type":"dir","mode":493,"tree":%q}]}`, foreignID))
	fakeID := digestOf(fake)
	var (
		pmu     sync.Mutex
		answers = map[int]string{}
	)
	hostile := dialHostileRunner(t, k.srv, betaKey.Key, "evil", func(ctx context.Context, c *link.Conn, n int) (string, error) {
		var send [][]byte
		var answer string
		switch n {
		case 1:
			root := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"f.json","type":"file","mode":420,"size":%d,"sha256":%q}]}`, len(fake), fakeID))
			send, answer = [][]byte{fake, root}, digestOf(root)
		case 2:
			answer = fakeID
		default:
			wrap := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"d","type":"dir","mode":493,"tree":%q}]}`, fakeID))
			send, answer = [][]byte{wrap}, digestOf(wrap)
		}
		if err := putBlobs(ctx, c, send...); err != nil {
			return "", err
		}
		pmu.Lock()
		answers[n] = answer
		pmu.Unlock()
		return answer, nil
	})
	beta := runBetaOnEvil(t, admin, 3)

	pmu.Lock()
	defer pmu.Unlock()
	require.GreaterOrEqual(t, len(answers), 3, "the three takes were answered")
	cps, err := admin.ListCheckpoints(ctx, beta.ID)
	require.NoError(t, err)
	accepted := 0
	for _, c := range cps.Data {
		require.NotEqual(t, fakeID, c.Snapshot, "checkpoint %s journaled R as a snapshot", c.ID)
		if c.Snapshot == answers[1] {
			accepted++
			continue
		}
		require.Equal(t, "", c.Snapshot, "checkpoint %s", c.ID)
		require.Contains(t, c.SnapshotError, "not the project's", "checkpoint %s says why", c.ID)
	}
	require.Positive(t, accepted, "the snapshot holding R as a file was accepted")
	hostile.mu.Lock()
	require.Empty(t, hostile.restores, "the server asked the hostile runner to restore something")
	hostile.mu.Unlock()
}

// TestAdversarialRunners_WrappedTreeAgainstTheLast: a hostile runner of
// project beta has its first snapshot accepted (a directory d of its own,
// every byte sent), which the server then claims its next snapshots
// against (only what differs from it is asked about). It answers the
// next takes with alpha's snapshot where d was, then beside d, sending
// only its new roots: both are refused, as without a last snapshot, and
// no checkpoint journals them. Its first root again, with nothing sent,
// is accepted (it is beta's).
func TestAdversarialRunners_WrappedTreeAgainstTheLast(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-againstlast-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	foreignID, betaKey := alphaSecretAndBetaRunnerKey(t, k, admin, boot)
	mine := []byte("beta's own file\n")
	myDir := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"f","type":"file","mode":420,"size":%d,"sha256":%q}]}`, len(mine), digestOf(mine)))
	myEntry := fmt.Sprintf(`{"name":"d","type":"dir","mode":493,"tree":%q}`, digestOf(myDir))
	first := []byte(`{"v":1,"entries":[` + myEntry + `]}`)
	replaced := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"d","type":"dir","mode":493,"tree":%q}]}`, foreignID))
	beside := []byte(`{"v":1,"entries":[` + myEntry + fmt.Sprintf(`,{"name":"e","type":"dir","mode":493,"tree":%q}]}`, foreignID))
	var (
		pmu     sync.Mutex
		answers = map[int]string{}
	)
	hostile := dialHostileRunner(t, k.srv, betaKey.Key, "evil", func(ctx context.Context, c *link.Conn, n int) (string, error) {
		send := [][]byte{first}
		switch n {
		case 1:
			send = [][]byte{mine, myDir, first}
		case 2:
			send = [][]byte{replaced}
		case 3:
			send = [][]byte{beside}
		default:
			send = nil // first again: beta's already
		}
		if err := putBlobs(ctx, c, send...); err != nil {
			return "", err
		}
		answer := digestOf(first)
		if len(send) == 1 {
			answer = digestOf(send[0])
		}
		pmu.Lock()
		answers[n] = answer
		pmu.Unlock()
		return answer, nil
	})
	beta := runBetaOnEvil(t, admin, 4)

	pmu.Lock()
	defer pmu.Unlock()
	require.GreaterOrEqual(t, len(answers), 4, "the four takes were answered")
	require.Equal(t, digestOf(replaced), answers[2])
	require.Equal(t, digestOf(beside), answers[3])
	cps, err := admin.ListCheckpoints(ctx, beta.ID)
	require.NoError(t, err)
	accepted, refused := 0, 0
	for _, c := range cps.Data {
		require.NotEqual(t, digestOf(replaced), c.Snapshot, "checkpoint %s journaled alpha's snapshot in d's place", c.ID)
		require.NotEqual(t, digestOf(beside), c.Snapshot, "checkpoint %s journaled alpha's snapshot beside d", c.ID)
		if c.Snapshot == digestOf(first) {
			accepted++
			continue
		}
		require.Equal(t, "", c.Snapshot, "checkpoint %s", c.ID)
		require.Contains(t, c.SnapshotError, "not the project's", "checkpoint %s says why", c.ID)
		refused++
	}
	require.GreaterOrEqual(t, accepted, 2, "its own snapshot, sent and then not")
	require.Equal(t, 2, refused, "both wrappings")
	hostile.mu.Lock()
	require.Empty(t, hostile.restores, "the server asked the hostile runner to restore something")
	hostile.mu.Unlock()
}

// TestAdversarialRunners_UploadBounds: a hostile runner uploads blobs in
// parts and never finishes them, to hold the server's memory. Outside a
// take it may store nothing; during one, a fifth unfinished upload at
// once is refused as busy, a part out of order, a size past a blob's
// bound and bytes that are not their digest are refused, and what it left
// unfinished is dropped when the take ends (its next part is out of
// order). The session goes on: the runner's own honest snapshot is taken.
func TestAdversarialRunners_UploadBounds(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-uploads-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	key := k.create("uploader", lt.RoleRunner)

	codeOf := func(err error) string {
		var re *link.RemoteError
		if errors.As(err, &re) {
			return re.Code
		}
		return fmt.Sprint(err)
	}
	part := func(ctx context.Context, c *link.Conn, name string, size, offset int64) error {
		digest := digestOf([]byte(name))
		return c.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: digest, Size: size, Offset: offset, Data: []byte(strings.Repeat("x", 1024))}, nil, nil)
	}
	var (
		mu     sync.Mutex
		got    = map[string]string{}
		conn   *link.Conn
		outErr error
	)
	dialHostileRunner(t, k.srv, key.Key, "hoarder", func(ctx context.Context, c *link.Conn, n int) (string, error) {
		mu.Lock()
		conn = c
		mu.Unlock()
		if n == 1 {
			for i := range 4 {
				if err := part(ctx, c, fmt.Sprint("held-", i), 1<<20, 0); err != nil {
					return "", err
				}
			}
			codes := map[string]string{
				"fifth unfinished": codeOf(part(ctx, c, "held-4", 1<<20, 0)),
				"out of order":     codeOf(part(ctx, c, "held-0", 1<<20, 4096)),
				"past a blob":      codeOf(part(ctx, c, "huge", link.MaxBlobBytes+1, 0)),
				"wrong digest":     codeOf(c.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: digestOf([]byte("a")), Size: 1, Data: []byte("b")}, nil, nil)),
			}
			mu.Lock()
			maps.Copy(got, codes)
			mu.Unlock()
		} else if n == 2 {
			// The held parts were dropped when the first take ended.
			code := codeOf(part(ctx, c, "held-1", 1<<20, 1024))
			mu.Lock()
			got["after the take"] = code
			mu.Unlock()
		}
		root := []byte(`{"v":1,"entries":[]}`)
		return digestOf(root), putBlobs(ctx, c, root)
	})

	s := twoShellStepsOn(t, admin, "hoarder")
	ok := assert.Eventually(t, func() bool {
		s, err := admin.GetSession(ctx, s.ID)
		return err == nil && s.Status == lt.SessionIdle
	}, time.Minute, 10*time.Millisecond, "the session ends its turn")
	if !ok {
		evs, _ := admin.ListEvents(ctx, s.ID, 0, 500)
		for _, ev := range evs.Data {
			t.Logf("%s %s", ev.Type, ev.Data)
		}
		t.FailNow()
	}

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]string{
		"fifth unfinished": link.CodeBusy,
		"out of order":     link.CodeBadParams,
		"past a blob":      link.CodeBadParams,
		"wrong digest":     link.CodeBadParams,
		"after the take":   link.CodeBadParams,
	}, got)
	// No take now: nothing may be stored.
	outErr = part(ctx, conn, "outside", 1024, 0)
	require.Equal(t, link.CodeBadParams, codeOf(outErr))
	cps, err := admin.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	require.NotEmpty(t, cps.Data)
	for _, c := range cps.Data {
		require.Equal(t, digestOf([]byte(`{"v":1,"entries":[]}`)), c.Snapshot, "checkpoint %s: the runner's own snapshot is taken (%s)", c.ID, c.SnapshotError)
	}
}
