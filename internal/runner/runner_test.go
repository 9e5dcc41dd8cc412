package runner_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/runner"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
)

// server is a real hub over a real SQLite store behind a loopback HTTP
// server that admits the bearer tokens "good" (key_1) and "other" (key_2,
// of the same project) (internal/server does the real authentication: the
// e2e tests cover it), as keys that stay valid while valid is true.
type server struct {
	url   string
	hub   *hub.Hub
	store *sqlite.Store
	valid atomic.Bool
	// revoked holds the ids of keys revoked one by one.
	revoked sync.Map
}

func newServer(t *testing.T, mutate ...func(*hub.Config)) *server {
	t.Helper()
	st := openStore(t)
	return newNode(t, "node-a", st, st, mutate...)
}

// openStore opens a migrated SQLite store, closed when the test ends.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(t.Context()))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// newNode is a server (one node, named node) on st, its hub reaching the
// store through via (st itself, or a way to it a test can hold back).
func newNode(t *testing.T, node string, st *sqlite.Store, via hub.Store, mutate ...func(*hub.Config)) *server {
	t.Helper()
	s := &server{store: st}
	s.valid.Store(true)
	hc := hub.Config{TouchInterval: 20 * time.Millisecond}
	for _, m := range mutate {
		m(&hc)
	}
	s.hub = hub.New(node, via, &hc)
	base, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != runner.ConnectPath {
			http.NotFound(w, r)
			return
		}
		keyID := map[string]string{"Bearer good": "key_1", "Bearer other": "key_2"}[r.Header.Get("Authorization")]
		valid := func() bool { _, gone := s.revoked.Load(keyID); return s.valid.Load() && !gone }
		if keyID == "" || !valid() {
			http.Error(w, `{"error":{"code":"unauthorized","message":"invalid API key"}}`, http.StatusUnauthorized)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		s.hub.Serve(base, ws, hub.Key{ID: keyID, Project: "default"}, func(context.Context) (bool, error) { return valid(), nil })
	}))
	t.Cleanup(func() {
		stop()
		srv.Close()
		wg.Wait()
	})
	s.url = srv.URL
	return s
}

// start runs a runner named name against s until the test ends; its Run
// error comes on the returned channel.
func start(t *testing.T, s *server, name, key string, mutate ...func(*runner.Config)) (<-chan error, string) {
	t.Helper()
	backend, _ := sandbox.Detect(t.Context(), sandbox.DetectOptions{Local: true})
	data := t.TempDir()
	cfg := runner.Config{
		Server: s.url, Key: key, DataDir: data, Backend: backend,
		Hello:      link.Hello{Name: name, Labels: []string{"gpu", "linux"}, Capacity: 2, Version: "test"},
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	r, err := runner.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { errc <- r.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the runner did not stop")
		}
	})
	return errc, data
}

// connected waits until the hub holds runner name and returns it.
func connected(t *testing.T, s *server, name string) *hub.Runner {
	t.Helper()
	var r *hub.Runner
	require.Eventually(t, func() bool {
		var ok bool
		r, ok = s.hub.Get("default", name)
		return ok
	}, 10*time.Second, time.Millisecond)
	return r
}

// TestExecOnTheRunner: a connected runner is listed with its labels and
// runs a command in the session's workspace under its data directory,
// its output streamed back.
func TestExecOnTheRunner(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, data := start(t, s, "box1", "good")
	r := connected(t, s, "box1")
	require.Equal(t, []string{"gpu", "linux"}, r.Row.Labels)
	require.Equal(t, 2, r.Row.Capacity)
	rows, err := s.store.RunnerList(t.Context(), "", 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "node-a", rows[0].Node)

	out, err := hub.Exec(t.Context(), r, &link.ExecParams{Session: "ses_1", Command: "echo hi > made.txt; cat made.txt; echo oops >&2; exit 3"})
	require.NoError(t, err)
	require.Equal(t, 3, out.ExitCode)
	require.Equal(t, "hi\n", out.Stdout)
	require.Equal(t, "oops\n", out.Stderr)
	b, err := os.ReadFile(filepath.Join(data, "workspaces", "ses_1", "made.txt"))
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(b))

	// A large output crosses many frames and comes back whole.
	out, err = hub.Exec(t.Context(), r, &link.ExecParams{Session: "ses_1", Command: "head -c 3000000 /dev/zero | tr '\\0' x", MaxOutputBytes: 4 << 20})
	require.NoError(t, err)
	require.Len(t, out.Stdout, 3_000_000)

	// Bad params never reach the sandbox: the runner checks them too.
	var re *link.RemoteError
	err = r.Conn.Call(t.Context(), link.MethodExec, map[string]any{"session": "../etc", "command": "true"}, nil, nil)
	require.ErrorAs(t, err, &re)
	require.Equal(t, link.CodeBadParams, re.Code)
	err = r.Conn.Call(t.Context(), link.MethodExec, map[string]any{"session": "ses_1", "command": "true", "cwd": "/"}, nil, nil)
	require.ErrorAs(t, err, &re)
	require.Contains(t, re.Message, `unknown field "cwd"`)
}

// TestExecCancelled: cancelling the call stops the command on the runner
// (its handler ends, so nothing stays in flight on either side).
func TestExecCancelled(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, data := start(t, s, "box1", "good")
	r := connected(t, s, "box1")
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := hub.Exec(ctx, r, &link.ExecParams{Session: "ses_2", Command: "touch started; sleep 60"})
		errc <- err
	}()
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(data, "workspaces", "ses_2", "started"))
		return err == nil
	}, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Eventually(t, func() bool { out, _ := r.Conn.InFlight(); return out == 0 }, 10*time.Second, time.Millisecond,
		"the runner answered the cancelled call: its command ended")
}

// TestReconnects: a connection the server drops is dialled again, as a
// new connection.
func TestReconnects(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	start(t, s, "box1", "good")
	first := connected(t, s, "box1")
	first.Conn.CloseWith(websocket.StatusGoingAway, "node restarting")
	require.Eventually(t, func() bool {
		r, ok := s.hub.Get("default", "box1")
		return ok && r.Row.ConnID != first.Row.ConnID
	}, 10*time.Second, time.Millisecond)
}

// TestRefusedKeyStopsTheRunner: a key refused at connect ends Run with
// ErrRefused (no retry loop against a dead key).
func TestRefusedKeyStopsTheRunner(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	errc, _ := start(t, s, "box1", "lhk_bad")
	select {
	case err := <-errc:
		require.ErrorIs(t, err, runner.ErrRefused)
		require.ErrorContains(t, err, "401")
		require.ErrorContains(t, err, "invalid API key")
		require.NotContains(t, err.Error(), "lhk_bad")
	case <-time.After(10 * time.Second):
		t.Fatal("the runner kept trying a refused key")
	}
}

// TestRevokedKeyClosesTheConnection: a key revoked while the runner is
// connected closes the connection at the next check, the runner stops,
// and its row is gone.
func TestRevokedKeyClosesTheConnection(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	errc, _ := start(t, s, "box1", "good")
	connected(t, s, "box1")
	s.valid.Store(false)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, runner.ErrRefused)
		require.Equal(t, link.StatusKeyRevoked, websocket.CloseStatus(err))
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked runner stayed connected")
	}
	require.Eventually(t, func() bool {
		rows, err := s.store.RunnerList(t.Context(), "", 0)
		return err == nil && len(rows) == 0
	}, 10*time.Second, time.Millisecond)
}

// TestSameNameNewerReplacesOlder: a second runner under a taken name
// takes it over; the older one is told and stops (it does not fight back).
func TestSameNameNewerReplacesOlder(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	olderErr, _ := start(t, s, "box1", "good")
	older := connected(t, s, "box1")
	start(t, s, "box1", "good", func(c *runner.Config) { c.Hello.Labels = []string{"newer"} })
	select {
	case err := <-olderErr:
		require.ErrorIs(t, err, runner.ErrRefused)
		require.Equal(t, link.StatusReplaced, websocket.CloseStatus(err))
	case <-time.After(10 * time.Second):
		t.Fatal("the older runner was not told")
	}
	r := connected(t, s, "box1")
	require.NotEqual(t, older.Row.ConnID, r.Row.ConnID)
	require.Equal(t, []string{"newer"}, r.Row.Labels)
	require.Eventually(t, func() bool {
		rows, err := s.store.RunnerList(t.Context(), "", 0)
		return err == nil && len(rows) == 1 && rows[0].ConnID == r.Row.ConnID
	}, 10*time.Second, time.Millisecond, "the older connection's end removed not the newer's row")
}

// TestNameHeldByAnotherKey: another key of the project cannot take a
// live runner's name: the newcomer is refused with the reason, the holder
// keeps its connection, and the refused runner keeps trying (with backoff)
// until the name is free.
func TestNameHeldByAnotherKey(t *testing.T) {
	t.Parallel()
	// The holder's row must stay fresh throughout: at the default test
	// interval (stale after 60 ms) a loaded machine delayed a touch past
	// that, and the other key took the name over, as it may.
	s := newServer(t, func(c *hub.Config) { c.TouchInterval = 500 * time.Millisecond })
	holderErr, _ := start(t, s, "box1", "good")
	holder := connected(t, s, "box1")

	ws, _, err := websocket.Dial(t.Context(), s.url+runner.ConnectPath, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer other"}}})
	require.NoError(t, err)
	defer ws.CloseNow()
	require.NoError(t, link.WriteJSON(t.Context(), ws, link.Hello{Name: "box1", Capacity: 1, Protocol: link.ProtocolVersion}))
	_, _, err = ws.Read(t.Context())
	require.Equal(t, link.StatusNameHeld, websocket.CloseStatus(err))
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "runner name box1 is held by another key", ce.Reason)

	otherErr, _ := start(t, s, "box1", "other", func(c *runner.Config) { c.Hello.Labels = []string{"other"} })
	// The holder is never replaced while the other key keeps trying.
	for range 5 {
		r := connected(t, s, "box1")
		require.Equal(t, holder.Row.ConnID, r.Row.ConnID)
		select {
		case err := <-holderErr:
			t.Fatalf("the holder stopped: %v", err)
		case err := <-otherErr:
			t.Fatalf("the refused runner gave up: %v", err)
		default:
		}
		rows, err := s.store.RunnerList(t.Context(), "", 0)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, "key_1", rows[0].KeyID)
	}

	// The holder's key is revoked: it stops, the name is free, and the
	// runner that kept trying gets it.
	s.revoked.Store("key_1", true)
	select {
	case err := <-holderErr:
		require.Equal(t, link.StatusKeyRevoked, websocket.CloseStatus(err))
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked holder stayed connected")
	}
	require.Eventually(t, func() bool {
		r, ok := s.hub.Get("default", "box1")
		return ok && r.Row.KeyID == "key_2" && slices.Equal(r.Row.Labels, []string{"other"})
	}, 10*time.Second, time.Millisecond)
}

// frozen is a node's way to the store that a test can hold back, as a
// node frozen (or cut from the database) is: its touches fail, so its
// rows go stale while its connections live on.
type frozen struct {
	hub.Store
	held atomic.Bool
}

func (f *frozen) RunnerTouch(ctx context.Context, project, name, connID string) error {
	if f.held.Load() {
		return errors.New("the node is frozen")
	}
	return f.Store.RunnerTouch(ctx, project, name, connID)
}

// TestStaleTakeoverOnAnotherNode: two nodes on one store. Node A's
// connection of box1 (key_1) goes stale while it lives (A cannot touch
// its row); another key takes the name over on node B; when A can touch
// again, it finds its row taken and closes its connection with
// link.StatusTakenOver (so the runner tries again later instead of
// stopping for good), without touching the row back: B's connection
// keeps the name.
func TestStaleTakeoverOnAnotherNode(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	gate := &frozen{Store: st}
	a := newNode(t, "node-a", st, gate)
	b := newNode(t, "node-b", st, st)

	old, err := dialHello(t, a, "good", "box1")
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { _, _, err := old.Read(context.Background()); closed <- err }()
	connected(t, a, "box1")

	gate.held.Store(true)
	start(t, b, "box1", "other") // refused (4005) while A's row is fresh, then takes it
	taker := connected(t, b, "box1")
	require.Equal(t, "key_2", taker.Row.KeyID)
	_, ok := a.hub.Get("default", "box1")
	require.True(t, ok, "node A still holds its connection: it has not noticed yet")

	gate.held.Store(false)
	select {
	case err := <-closed:
		require.Equal(t, link.StatusTakenOver, websocket.CloseStatus(err), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("node A kept the connection whose row was taken over")
	}
	require.Eventually(t, func() bool { _, ok := a.hub.Get("default", "box1"); return !ok }, 10*time.Second, time.Millisecond)
	rows, err := st.RunnerList(t.Context(), "", 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, taker.Row.ConnID, rows[0].ConnID, "node A did not take the row back")
	require.Equal(t, "node-b", rows[0].Node)
	r, ok := b.hub.Get("default", "box1")
	require.True(t, ok)
	require.Equal(t, taker.Row.ConnID, r.Row.ConnID, "node B's connection lives on")
}

// dialHello connects to s with token as the bearer key and says hello as
// name: the welcome's error (nil: welcomed) and the socket.
func dialHello(t *testing.T, s *server, token, name string) (*websocket.Conn, error) {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), s.url+runner.ConnectPath, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.CloseNow() })
	if err := link.WriteJSON(t.Context(), ws, link.Hello{Name: name, Capacity: 1, Protocol: link.ProtocolVersion}); err != nil {
		return ws, err
	}
	var welcome link.Welcome
	return ws, link.ReadJSON(t.Context(), ws, &welcome)
}

// TestConnectionCaps: a key past its cap of connections, and any key past
// the node's, is refused (close 4007, the reason saying which) before
// anything is recorded; a connection that ends frees its place.
func TestConnectionCaps(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(c *hub.Config) { c.MaxConnsPerKey, c.MaxConns = 2, 3 })
	first, err := dialHello(t, s, "good", "box1")
	require.NoError(t, err)
	_, err = dialHello(t, s, "good", "box2")
	require.NoError(t, err)
	requireRefused := func(err error, reason string) {
		t.Helper()
		require.Equal(t, link.StatusTooManyConns, websocket.CloseStatus(err), "%v", err)
		var ce websocket.CloseError
		require.True(t, errors.As(err, &ce))
		require.Contains(t, ce.Reason, reason)
	}
	_, err = dialHello(t, s, "good", "box3")
	requireRefused(err, "this runner key holds 2 connections")
	_, err = dialHello(t, s, "other", "box4")
	require.NoError(t, err, "another key has its own cap")
	_, err = dialHello(t, s, "other", "box5")
	requireRefused(err, "this node holds 3 runner connections")
	rows, err := s.store.RunnerList(t.Context(), "", 0)
	require.NoError(t, err)
	require.Len(t, rows, 3, "the refused ones recorded nothing")

	require.NoError(t, first.Close(websocket.StatusNormalClosure, "bye"))
	require.Eventually(t, func() bool {
		ws, err := dialHello(t, s, "good", "box6")
		if err != nil {
			_ = ws.CloseNow()
			return false
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "a closed connection frees its place")
}

// TestBadHelloRefused: a Hello the server refuses stops the runner with
// the field named. (New refuses it first; this is a runner built to lie.)
func TestBadHelloRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ws, _, err := websocket.Dial(t.Context(), s.url+runner.ConnectPath, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer good"}}})
	require.NoError(t, err)
	defer ws.CloseNow()
	require.NoError(t, link.WriteJSON(t.Context(), ws, map[string]any{"name": "Box 1", "capacity": 1}))
	_, _, err = ws.Read(t.Context())
	require.Equal(t, link.StatusBadHello, websocket.CloseStatus(err))
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce))
	require.Contains(t, ce.Reason, "hello.name")
}

// TestBackoff: the wait doubles from min to max, and jitter takes off at
// most half.
func TestBackoff(t *testing.T) {
	t.Parallel()
	minW, maxW := time.Second, time.Minute
	require.Equal(t, time.Second, runner.Backoff(0, minW, maxW, 0))
	require.Equal(t, 2*time.Second, runner.Backoff(1, minW, maxW, 0))
	require.Equal(t, 32*time.Second, runner.Backoff(5, minW, maxW, 0))
	require.Equal(t, time.Minute, runner.Backoff(6, minW, maxW, 0))
	require.Equal(t, time.Minute, runner.Backoff(1000, minW, maxW, 0))
	require.Equal(t, 16*time.Second, runner.Backoff(5, minW, maxW, 0.999999999).Round(time.Millisecond))
	require.Equal(t, 500*time.Millisecond, runner.Backoff(0, minW, maxW, 0.999999999).Round(time.Millisecond))
	require.Equal(t, 45*time.Second, runner.Backoff(9, minW, maxW, 0.5))
}

// TestConfigNamesTheField: a bad configuration is refused naming the
// field, never echoing the key.
func TestConfigNamesTheField(t *testing.T) {
	t.Parallel()
	backend, _ := sandbox.Detect(t.Context(), sandbox.DetectOptions{Local: true})
	good := runner.Config{Server: "http://127.0.0.1:1", Key: "lhk_secret", DataDir: t.TempDir(), Backend: backend,
		Hello: link.Hello{Name: "box1", Capacity: 1}}
	for want, mutate := range map[string]func(*runner.Config){
		"server: is required":     func(c *runner.Config) { c.Server = "" },
		"is not an http://":       func(c *runner.Config) { c.Server = "ftp://x" },
		"must not hold credentia": func(c *runner.Config) { c.Server = "http://u:p@x" },
		"key: is required":        func(c *runner.Config) { c.Key = "" },
		"data: is required":       func(c *runner.Config) { c.DataDir = "" },
		"hello.name":              func(c *runner.Config) { c.Hello.Name = "Box1" },
		"hello.capacity":          func(c *runner.Config) { c.Hello.Capacity = 0 },
		"hello.labels[1]":         func(c *runner.Config) { c.Hello.Labels = []string{"a", "a"} },
		"plain http to a host":    func(c *runner.Config) { c.Server = "http://runners.example.com" },
	} {
		c := good
		mutate(&c)
		_, err := runner.New(c)
		require.ErrorContains(t, err, want)
		require.NotContains(t, err.Error(), "lhk_secret")
	}
	_, err := runner.New(good)
	require.NoError(t, err)
	// Plain http is allowed to loopback, to any host with https, and to
	// any host when asked explicitly.
	for _, ok := range []runner.Config{
		{Server: "http://localhost:8080"}, {Server: "http://[::1]:8080"}, {Server: "https://runners.example.com"},
		{Server: "http://runners.example.com", Insecure: true},
	} {
		c := good
		c.Server, c.Insecure = ok.Server, ok.Insecure
		_, err := runner.New(c)
		require.NoError(t, err, c.Server)
	}
}
