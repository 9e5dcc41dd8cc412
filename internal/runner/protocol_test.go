package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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
)

// TestRunnerSaysItsProtocol: a runner says the protocol this build speaks
// in its Hello (its configuration need not), and the hub records it with
// the connection, listed by every node.
func TestRunnerSaysItsProtocol(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	start(t, s, "box1", "good")
	r := connected(t, s, "box1")
	require.Equal(t, link.ProtocolVersion, r.Row.Protocol)
	rows, err := s.store.RunnerList(t.Context(), "default", 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, link.ProtocolVersion, rows[0].Protocol)
}

// TestOutdatedRunnerStops: a server that needs a newer protocol than the
// runner speaks refuses it before recording anything (link.StatusOutdated),
// and the runner stops for good (ErrRefused), saying to upgrade it rather
// than trying again and again: only a new build helps. A runner from
// before versions (protocol 1) is refused by a server of this build.
func TestOutdatedRunnerStops(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		min, speaks int
	}{
		"the server needs a newer protocol": {min: link.ProtocolVersion + 1},
		"a runner from before versions":     {speaks: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(hc *hub.Config) { hc.MinProtocol = c.min })
			var connects atomic.Int32
			errc, _ := start(t, s, "box1", "good", func(rc *runner.Config) {
				rc.Hello.Protocol = c.speaks
				rc.OnConnect = func(link.Welcome) { connects.Add(1) }
			})
			var err error
			select {
			case err = <-errc:
			case <-time.After(10 * time.Second):
				t.Fatal("the outdated runner kept trying")
			}
			require.True(t, errors.Is(err, runner.ErrRefused), "%v", err)
			require.ErrorContains(t, err, "upgrade longhaul on this machine")
			require.ErrorContains(t, err, "the oldest this server takes")
			require.Zero(t, connects.Load(), "never welcomed")
			rows, lerr := s.store.RunnerList(t.Context(), "", 0)
			require.NoError(t, lerr)
			require.Empty(t, rows, "nothing recorded")
		})
	}
}

// TestHelloProtocolChecked: a Hello's protocol is absent (1), or 1 to
// MaxProtocolVersion; anything else is refused naming the field.
func TestHelloProtocolChecked(t *testing.T) {
	t.Parallel()
	h := link.Hello{Name: "box1", Capacity: 1}
	require.NoError(t, h.Check())
	require.Equal(t, 1, h.EffectiveProtocol(), "none said: a runner from before versions")
	h.Protocol = link.ProtocolVersion + 5
	require.NoError(t, h.Check(), "a newer runner answers every older call")
	require.Equal(t, link.ProtocolVersion+5, h.EffectiveProtocol())
	for _, p := range []int{-1, link.MaxProtocolVersion + 1} {
		h.Protocol = p
		require.ErrorContains(t, h.Check(), "hello.protocol")
	}
}

// oldServer is a server of an older build, written by hand: from before
// the protocol's versions (strictHello: it refuses a Hello with a field it
// does not know, "protocol"), or of protocol 3 (its Welcome says no
// version, and it has no env.abandoned: abandoned counts the calls of it
// that reached it anyway).
type oldServer struct {
	strictHello bool
	abandoned   atomic.Int32
	conns       chan *link.Conn
}

func (o *oldServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := context.WithoutCancel(r.Context())
	var raw json.RawMessage
	if link.ReadJSON(ctx, ws, &raw) != nil {
		return
	}
	if o.strictHello {
		var hello struct {
			Name     string   `json:"name"`
			Labels   []string `json:"labels"`
			Capacity int      `json:"capacity"`
			Version  string   `json:"version"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&hello); err != nil {
			_ = ws.Close(link.StatusBadHello, "hello: "+err.Error())
			return
		}
	}
	if link.WriteJSON(ctx, ws, map[string]string{"connection_id": "rc_old", "node": "old-node"}) != nil {
		return
	}
	c := link.New(ws, &link.Config{Handlers: map[string]link.Handler{
		link.MethodEnvAbandoned: func(context.Context, *link.Request) (any, error) { o.abandoned.Add(1); return nil, nil },
	}})
	o.conns <- c
	<-c.Done()
}

// startAgainstOld runs a runner of this build against o, its log in the
// returned buffer and its clock at *now.
func startAgainstOld(t *testing.T, o *oldServer, now *atomic.Pointer[time.Time]) *syncLog {
	t.Helper()
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	logs := &syncLog{}
	backend, _ := sandbox.Detect(t.Context(), sandbox.DetectOptions{Local: true})
	r, err := runner.New(runner.Config{
		Server: srv.URL, Key: "k", DataDir: t.TempDir(), Backend: backend,
		Hello:      link.Hello{Name: "box1", Capacity: 2, Version: "test"},
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Now: func() time.Time { return *now.Load() },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return logs
}

// syncLog is a log buffer safe to read while the runner writes it.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNewRunnerAgainstAnOldServer: a runner of this build meets a server
// of an older one. A server from before the protocol's versions refuses
// its Hello: the runner says the server is older, naming the versions,
// and to upgrade the server. A server of protocol 3 (its Welcome says
// none) takes it: the runner says once that the server speaks 3 or older
// and what it does without, and it degrades: an open the server never
// claimed is closed when its bound passed, as before, and not reported
// (no env.abandoned reaches the server, which would not know it).
func TestNewRunnerAgainstAnOldServer(t *testing.T) {
	t.Parallel()
	var now atomic.Pointer[time.Time]
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	now.Store(&start)

	t.Run("before versions", func(t *testing.T) {
		t.Parallel()
		logs := startAgainstOld(t, &oldServer{strictHello: true, conns: make(chan *link.Conn, 1)}, &now)
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "the server is older than this runner") },
			10*time.Second, time.Millisecond)
		require.Contains(t, logs.String(), fmt.Sprintf("this runner speaks %d", link.ProtocolVersion))
		require.Contains(t, logs.String(), "upgrade the server")
	})

	t.Run("protocol 3", func(t *testing.T) {
		t.Parallel()
		o := &oldServer{conns: make(chan *link.Conn, 1)}
		logs := startAgainstOld(t, o, &now)
		var c *link.Conn
		select {
		case c = <-o.conns:
		case <-time.After(10 * time.Second):
			t.Fatal("the runner never connected to the protocol-3 server")
		}
		require.Eventually(t, func() bool {
			return strings.Contains(logs.String(), fmt.Sprintf("the server speaks runner protocol 3 or older (it does not say), this runner %d", link.ProtocolVersion))
		}, 10*time.Second, time.Millisecond)
		require.Contains(t, logs.String(), "upgrade the server")

		ctx := t.Context()
		require.NoError(t, c.Call(ctx, link.MethodEnvOpen, link.EnvOpenParams{EnvID: "e1", Workspace: "ses_1", Session: "ses_1"}, nil, nil))
		later := start.Add(3 * time.Minute)
		now.Store(&later)
		require.NoError(t, c.Call(ctx, link.MethodEnvOpen, link.EnvOpenParams{EnvID: "e2", Workspace: "ses_2", Session: "ses_2"}, nil, nil))
		var re *link.RemoteError
		require.ErrorAs(t, c.Call(ctx, link.MethodEnvClaim, link.EnvRef{EnvID: "e1"}, nil, nil), &re, "e1 was closed as abandoned")
		require.Equal(t, link.CodeClosed, re.Code)
		require.NoError(t, c.Call(ctx, link.MethodEnvClaim, link.EnvRef{EnvID: "e2"}, nil, nil))
		require.Zero(t, o.abandoned.Load(), "nothing the old server does not know was sent")
	})
}
