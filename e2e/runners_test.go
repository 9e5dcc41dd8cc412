package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRunnerConnections runs the real binary as a server and as runner
// processes on loopback: a runner is listed by GET /v1/runners (and
// `longhaul runners`) with its labels; its key opens nothing else, and no
// other role's key opens its route; a runner killed with SIGKILL leaves
// the list; a revoked key's runner is disconnected at the next check and
// stops, and is refused when it comes back. Its traffic, recorded by a
// relay between it and the server, carries no vault value, no bootstrap
// key and no database URL.
func TestRunnerConnections(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-e2e-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	const vaultValue = "vault-canary-5f1e0c7a9b"
	_, _, err := admin.PutSecret(ctx, "DEPLOY_TOKEN", &lt.PutSecretRequest{Value: vaultValue, Hosts: []string{"api.example.com"}, Inject: &lt.SecretInjection{Bearer: true}})
	require.NoError(t, err)
	runnerKey := k.create("box-key", lt.RoleRunner)
	operator := k.create("ops", lt.RoleOperator)
	ops, err := client.New(k.srv.url, &client.Config{APIKey: operator.Key})
	require.NoError(t, err)

	// The runner key opens nothing but its connection: not who it is,
	// not the API's document, not a path that does not exist (a 403, not
	// a 404 that would map the API); no other role's key, an admin's
	// included, opens its connection.
	var r httpResult
	for _, path := range []string{"/v1/sessions", "/v1/runners", "/v1/me", "/v1/openapi.json", "/v1/version", "/v1/no-such-route"} {
		r = k.send(runnerKey.Key, http.MethodGet, path, "")
		require.Equal(t, http.StatusForbidden, r.status, "%s: %s", path, r.body)
		require.Contains(t, string(r.body), "a runner key opens its connection and nothing else", path)
	}
	r = k.send(runnerKey.Key, http.MethodPost, "/v1/sessions", `{"agent":"x","input":"hi"}`)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	for _, key := range []string{boot, operator.Key} {
		_, resp, err := websocket.Dial(ctx, k.srv.url+"/v1/runners/connect", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
		require.Error(t, err)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	}

	relay := startRelay(t, k.srv.addr)
	box1 := startRunner(t, relay.url, runnerKey.Key, "box1", "--label", "gpu", "--label", "linux", "--capacity", "2")
	var listed lt.Runner
	require.Eventually(t, func() bool {
		l, err := ops.ListRunners(ctx, "")
		if err != nil || len(l.Data) != 1 {
			return false
		}
		listed = l.Data[0]
		return true
	}, 30*time.Second, 20*time.Millisecond, "the runner is listed")
	require.Equal(t, "box1", listed.Name)
	require.Equal(t, []string{"gpu", "linux"}, listed.Labels)
	require.Equal(t, 2, listed.Capacity)
	require.Equal(t, lt.DefaultProject, listed.Project)
	require.Equal(t, runnerKey.ID, listed.KeyID)
	require.NotEmpty(t, listed.Node)
	require.Equal(t, link.ProtocolVersion, listed.Protocol, "the runner protocol this build speaks")
	out, err := exec.CommandContext(ctx, longhaulBin, "runners", "--server", k.srv.url, "--api-key", operator.Key).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "box1")
	require.Contains(t, string(out), "gpu,linux")
	require.Contains(t, string(out), "SESSIONS")
	require.Contains(t, string(out), "PROTOCOL")
	require.Equal(t, []string{}, listed.Sessions, "no session has its environment open on it")

	// SIGKILL: its socket closes with it, and it leaves the list well
	// within the heartbeat deadline.
	box1.kill(t)
	require.Eventually(t, func() bool {
		l, err := ops.ListRunners(ctx, "")
		return err == nil && len(l.Data) == 0
	}, 15*time.Second, 20*time.Millisecond, "a killed runner leaves the list")

	// A revoked key: the live connection is closed at the next check,
	// the runner stops saying why, and its row is gone.
	box2 := startRunner(t, relay.url, runnerKey.Key, "box2")
	require.Eventually(t, func() bool {
		l, err := ops.ListRunners(ctx, "")
		return err == nil && len(l.Data) == 1 && l.Data[0].Name == "box2"
	}, 30*time.Second, 20*time.Millisecond)
	r = k.send(boot, http.MethodDelete, "/v1/keys/"+runnerKey.ID, "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	code, stderr := box2.wait(t, 30*time.Second)
	require.NotZero(t, code, "a revoked runner stops with an error")
	require.Contains(t, stderr, "revoked")
	l, err := ops.ListRunners(ctx, "")
	require.NoError(t, err)
	require.Empty(t, l.Data)

	// Coming back with the revoked key: refused at connect.
	again := startRunner(t, relay.url, runnerKey.Key, "box2")
	code, stderr = again.wait(t, 30*time.Second)
	require.NotZero(t, code)
	require.Contains(t, stderr, "401")
	require.NotContains(t, stderr, runnerKey.Key, "the refusal does not echo the key")

	// What the runners sent and received: their names went through the
	// relay, no secret did.
	traffic := relay.bytes()
	require.Contains(t, traffic, `"name":"box1"`, "the relay saw the runners' traffic")
	for _, secret := range []string{vaultValue, boot, "postgres://", "LONGHAUL_VAULT_KEY", k.srv.dataDir} {
		require.NotContains(t, traffic, secret)
	}
}

// runnerProc is a `longhaul runner` process.
type runnerProc struct {
	// data is its --data directory (its workspaces are under it).
	data   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

// startRunnersServer starts a server with bootstrap key boot, the local
// sandbox and a runner check every 200 ms, and returns it with a client
// of boot.
func startRunnersServer(t *testing.T, boot string) (*keyed, *client.Client) {
	t.Helper()
	k := startKeyed(t, boot)
	k.srv.kill()
	k.srv.args = append(k.srv.args, "--sandbox", "local", "--runner-check-interval", "200ms")
	require.NoError(t, k.srv.start())
	admin, err := client.New(k.srv.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	return k, admin
}

// startRunner starts `longhaul runner` against server with key (given in
// the environment, as an operator should), killed when the test ends.
func startRunner(t *testing.T, server, key, name string, args ...string) *runnerProc {
	t.Helper()
	return startRunnerIn(t, server, key, name, filepath.Join(t.TempDir(), "runner"), args...)
}

// startRunnerIn is startRunner with the runner's data directory data (a
// runner restarted on the same machine keeps its workspaces).
func startRunnerIn(t *testing.T, server, key, name, data string, args ...string) *runnerProc {
	t.Helper()
	all := append([]string{"runner", "--server", server, "--name", name, "--sandbox", "local", "--data", data}, args...)
	cmd := exec.Command(longhaulBin, all...)
	cmd.Env = append(serverEnv(), "LONGHAUL_RUNNER_KEY="+key)
	p := &runnerProc{data: data, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("runner %s output:\n%s", name, p.stderr.String())
		}
	})
	return p
}

func (p *runnerProc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// wait waits for the runner to exit by itself and returns its exit code
// and output.
func (p *runnerProc) wait(t *testing.T, timeout time.Duration) (int, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("the runner did not stop:\n%s", p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.stderr.String()
}

// syncBuffer is a bytes.Buffer safe for a process's writes and a test's
// reads at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// relay stands between runners and the server as a WebSocket relay: it
// opens the server's connection for each runner (with the runner's
// Authorization header), passes every message both ways and records it,
// and passes on the server's refusals and close codes.
type relay struct {
	url string
	rec syncBuffer
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	rl := &relay{}
	base, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up, resp, err := websocket.Dial(base, "http://"+target+r.URL.Path, &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": r.Header.Values("Authorization")},
		})
		if err != nil {
			if resp != nil {
				body, _ := io.ReadAll(resp.Body)
				w.WriteHeader(resp.StatusCode)
				_, _ = w.Write(body)
				return
			}
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		down, err := websocket.Accept(w, r, nil)
		if err != nil {
			_ = up.CloseNow()
			return
		}
		pipe := func(from, to *websocket.Conn) {
			for {
				typ, data, err := from.Read(base)
				if err != nil {
					if code := websocket.CloseStatus(err); code != -1 {
						var ce websocket.CloseError
						_ = errors.As(err, &ce)
						_ = to.Close(code, ce.Reason)
					} else {
						_ = to.CloseNow()
					}
					return
				}
				_, _ = rl.rec.Write(append(data, '\n'))
				if err := to.Write(base, typ, data); err != nil {
					return
				}
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() { pipe(down, up) })
		wg.Go(func() { pipe(up, down) })
		wg.Wait()
	}))
	t.Cleanup(func() { cancel(); srv.Close() })
	rl.url = srv.URL
	return rl
}

// bytes is every message the relay passed, one a line.
func (rl *relay) bytes() string { return rl.rec.String() }

// runnerNodes are two nodes on a fresh PostgreSQL schema that take the
// bootstrap key boot and check their runners every 200 ms, with their
// node ids.
type runnerNodes struct {
	a, b     *server
	idA, idB string
}

func startRunnerNodes(t *testing.T, boot string) runnerNodes {
	t.Helper()
	c := newCluster(t, pgtest.FreshSchema(t), 4*time.Second)
	c.args = append(c.args, "--api-key", boot, "--runner-check-interval", "200ms")
	ia, ib := c.add(), c.add()
	return runnerNodes{a: c.nodes[ia], b: c.nodes[ib], idA: c.ids[ia], idB: c.ids[ib]}
}

// runnerKeyOn creates a runner key named name on srv as the bootstrap
// admin boot.
func runnerKeyOn(t *testing.T, srv *server, boot, name string) lt.APIKey {
	t.Helper()
	r := httpSend(t, srv, http.MethodPost, "/v1/keys", "", []byte(`{"name":"`+name+`","role":"runner"}`),
		map[string]string{"Authorization": "Bearer " + boot, "Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var key lt.APIKey
	require.NoError(t, json.Unmarshal(r.body, &key))
	return key
}

// runnersOn is GET /v1/runners on srv as the bootstrap admin boot.
func runnersOn(t *testing.T, srv *server, boot string) []lt.Runner {
	t.Helper()
	cl, err := client.New(srv.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	l, err := cl.ListRunners(t.Context(), "")
	require.NoError(t, err)
	return l.Data
}

// TestRunnersAcrossNodes: two nodes on one PostgreSQL store. A runner
// connected to node A is listed by node B (node A's id on it); a runner
// of the same name connecting to node B replaces it, and node A closes
// the older connection at its next check (the older runner stops); when
// node B is killed, its runner's row goes stale and node A stops listing
// it within three check intervals.
func TestRunnersAcrossNodes(t *testing.T) {
	t.Parallel()
	const boot = "lh-runners-nodes-bootstrap"
	n := startRunnerNodes(t, boot)
	a, b := n.a, n.b
	key := runnerKeyOn(t, a, boot, "box")
	list := func(srv *server) []lt.Runner { return runnersOn(t, srv, boot) }

	onA := startRunner(t, a.url, key.Key, "box1", "--label", "on-a")
	require.Eventually(t, func() bool {
		l := list(b)
		return len(l) == 1 && l[0].Node == n.idA
	}, 30*time.Second, 20*time.Millisecond, "node B lists the runner node A holds")

	onB := startRunner(t, b.url, key.Key, "box1", "--label", "on-b")
	code, stderr := onA.wait(t, 30*time.Second)
	require.NotZero(t, code)
	require.Contains(t, stderr, "replaced")
	l := list(a)
	require.Len(t, l, 1)
	require.Equal(t, n.idB, l[0].Node, "node A lists the newer connection, on node B")
	require.Equal(t, []string{"on-b"}, l[0].Labels)

	b.kill()
	require.Eventually(t, func() bool { return len(list(a)) == 0 }, 30*time.Second, 50*time.Millisecond,
		"a dead node's runner leaves the list once its row is stale")
	onB.kill(t)
}

// TestFrozenRunnerDroppedAndBack: a runner that stops answering (SIGSTOP:
// its socket stays open) is dropped by the heartbeat within its deadline
// (5 s between pings, 10 s for the pong) and leaves the list; thawed, it
// finds its connection gone and connects again by itself.
func TestFrozenRunnerDroppedAndBack(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-frozen-bootstrap"
	k := startKeyed(t, boot)
	key := k.create("box-key", lt.RoleRunner)
	ops, err := client.New(k.srv.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	listed := func() int {
		l, err := ops.ListRunners(t.Context(), "")
		require.NoError(t, err)
		return len(l.Data)
	}
	box := startRunner(t, k.srv.url, key.Key, "box1")
	require.Eventually(t, func() bool { return listed() == 1 }, 30*time.Second, 20*time.Millisecond)

	require.NoError(t, box.cmd.Process.Signal(syscall.SIGSTOP))
	// The bound leaves room for a loaded machine over the 15 s deadline.
	require.Eventually(t, func() bool { return listed() == 0 }, 40*time.Second, 100*time.Millisecond,
		"the heartbeat drops a runner that does not answer")

	require.NoError(t, box.cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool { return listed() == 1 }, 60*time.Second, 50*time.Millisecond,
		"the thawed runner connects again")
}

// TestRunnerStaleTakeoverAcrossNodes: two nodes on one PostgreSQL store.
// A runner of key 1 connected to node A; node A freezes (SIGSTOP: it
// keeps the connection but touches nothing), so the row goes stale by the
// database's clock, and a runner of key 2 takes the name over on node B.
// Thawed, node A finds at its next check that its row was taken and
// closes its connection with 4006 ("taken over"), leaving the row to node
// B rather than touching it back; the first runner does not stop for good
// (another key must not be able to stop it): it keeps trying, refused
// while the name is held.
func TestRunnerStaleTakeoverAcrossNodes(t *testing.T) {
	t.Parallel()
	const boot = "lh-runners-takeover-bootstrap"
	n := startRunnerNodes(t, boot)
	a, b := n.a, n.b
	key1, key2 := runnerKeyOn(t, a, boot, "box-one"), runnerKeyOn(t, a, boot, "box-two")
	list := func(srv *server) []lt.Runner { return runnersOn(t, srv, boot) }

	first := startRunner(t, a.url, key1.Key, "box1")
	require.Eventually(t, func() bool {
		l := list(b)
		return len(l) == 1 && l[0].Node == n.idA && l[0].KeyID == key1.ID
	}, 30*time.Second, 20*time.Millisecond, "node B lists the runner node A holds")

	logFrom := a.logSize()
	a.pause()
	second := startRunner(t, b.url, key2.Key, "box1")
	require.Eventually(t, func() bool {
		l := list(b)
		return len(l) == 1 && l[0].Node == n.idB && l[0].KeyID == key2.ID
	}, 30*time.Second, 20*time.Millisecond, "key 2 takes the name once node A's row is stale")
	a.resume()

	require.Eventually(t, func() bool {
		return strings.Contains(a.logSince(logFrom), "taken over by another key")
	}, 30*time.Second, 20*time.Millisecond, "node A closes its connection at its next check")
	require.Eventually(t, func() bool {
		return strings.Contains(first.stderr.String(), "StatusCode(4006)")
	}, 30*time.Second, 20*time.Millisecond, "the first runner is told its name was taken over")
	// It keeps trying (refused while key 2 holds the name), and node A
	// never took the row back: both nodes list key 2's connection on B.
	require.Eventually(t, func() bool {
		return strings.Contains(first.stderr.String(), "StatusCode(4005)")
	}, 30*time.Second, 20*time.Millisecond, "the first runner tries again, refused while the name is held")
	select {
	case <-first.done:
		t.Fatalf("the first runner stopped for good:\n%s", first.stderr.String())
	default:
	}
	for _, srv := range []*server{a, b} {
		l := list(srv)
		require.Len(t, l, 1)
		require.Equal(t, key2.ID, l[0].KeyID)
		require.Equal(t, n.idB, l[0].Node)
	}
	second.kill(t)
}

// TestRunnerSessionOnAnotherNode: two nodes on one PostgreSQL store and a
// runner connected to node B only. A session created through node A's
// API (claimed there at creation) needs that runner: node A hands it to
// node B, which runs it on the runner at once, with no reconnection and
// no environment_connection wait; a follow-up turn, pinned to the runner,
// goes the same way.
func TestRunnerSessionOnAnotherNode(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-other-node-bootstrap"
	n := startRunnerNodes(t, boot)
	key := runnerKeyOn(t, n.a, boot, "box")
	onB := startRunner(t, n.b.url, key.Key, "box1", "--label", "gpu")
	require.Eventually(t, func() bool {
		l := runnersOn(t, n.a, boot)
		return len(l) == 1 && l[0].Node == n.idB
	}, 30*time.Second, 20*time.Millisecond, "node A lists the runner on node B")

	ctx := t.Context()
	admin, err := client.New(n.a.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": `echo "$LONGHAUL_SESSION_ID" >> where.txt`}}}},
		{"text": "done"},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": `echo again >> where.txt`}}}},
		{"text": "done again"},
	})
	require.NoError(t, err)
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Say where you are.",
		Tools: []lt.ToolSpec{{Name: "shell"}}, Environment: &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"gpu"}}},
	}})
	require.NoError(t, err)
	idle := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			got, err := admin.GetSession(ctx, s.ID)
			return err == nil && got.Status == lt.SessionIdle
		}, time.Minute, 10*time.Millisecond, "the session runs on the runner of the other node")
	}
	idle()
	_, err = admin.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	idle()

	b, err := os.ReadFile(filepath.Join(onB.data, "workspaces", s.ID, "where.txt"))
	require.NoError(t, err)
	require.Equal(t, s.ID+"\nagain\n", string(b), "both turns ran on the runner")
	acts, err := admin.ListActions(ctx, s.ID, "")
	require.NoError(t, err)
	require.Empty(t, acts.Data, "no environment_connection wait: the session was handed to the runner's node")
	evs, err := admin.ListEvents(ctx, s.ID, 0, 500)
	require.NoError(t, err)
	workers := map[string]bool{}
	for _, ev := range evs.Data {
		if ev.Type == lt.EventToolStarted {
			workers[ev.WorkerID] = true
		}
	}
	require.Equal(t, map[string]bool{n.idB: true}, workers, "its calls ran on node B, which holds the runner's connection")
	onB.kill(t)
}
