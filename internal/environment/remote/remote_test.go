package remote_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/environment/remote"
	"github.com/longhaul-dev/longhaul/internal/runner"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
)

// TestMain lets the test binary stand in for the longhaul binary inside a
// bwrap sandbox (the egress forwarder).
func TestMain(m *testing.M) { environmenttest.Main(m) }

const (
	project    = "default"
	runnerName = "box1"
)

// rig is a real server side (a hub over a SQLite store, serving runner
// connections from a loopback HTTP server) and a real runner connected to
// it over a WebSocket, its data directory its own (another machine).
type rig struct {
	hub  *hub.Hub
	st   *sqlite.Store
	url  string
	data string
	// stopRunner stops the runner and waits until it has.
	stopRunner func()
}

type rigOptions struct {
	sandbox sandbox.Backend
	// dial, when set, turns the server's URL into the one the runner
	// dials (through a relay).
	dial func(url string) string
	// limits are the runner operator's maxima.
	limits sandbox.Limits
	// maxUploadBytes is the hub's Config.MaxUploadBytes.
	maxUploadBytes int64
	// labels are the runner's.
	labels []string
	// owners, when set, wraps the store that records the blobs' owners.
	owners func(hub.OwnerStore) hub.OwnerStore
	// onAbandoned is the hub's Config.OnAbandoned.
	onAbandoned func(store.RunnerRow)
	// now is the runner's clock (runner.Config.Now).
	now func() time.Time
}

func newRig(tb testing.TB, blobs *environmenttest.Blobs, o rigOptions) *rig {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "runners.db"), nil)
	require.NoError(tb, err)
	require.NoError(tb, st.Migrate(context.Background()))
	quiet := slog.New(slog.DiscardHandler)
	var owners hub.OwnerStore = blobs.Store
	if o.owners != nil {
		owners = o.owners(owners)
	}
	h := hub.New("node-a", st, &hub.Config{TouchInterval: time.Second, Blobs: blobs, Owners: owners, Logger: quiet, MaxUploadBytes: o.maxUploadBytes,
		OnAbandoned: o.onAbandoned})
	base, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != runner.ConnectPath || r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		h.Serve(base, ws, hub.Key{ID: "key_1", Project: project}, func(context.Context) (bool, error) { return true, nil })
	}))
	rg := &rig{hub: h, st: st, url: srv.URL, data: tb.TempDir()}
	dialURL := srv.URL
	if o.dial != nil {
		dialURL = o.dial(srv.URL)
	}
	sb := o.sandbox
	if sb == nil {
		sb = sandbox.NewLocal()
	}
	rg.stopRunner = startRunner(tb, dialURL, rg.data, sb, o.limits, link.Hello{Name: runnerName, Labels: o.labels, Capacity: 64, Version: "test"},
		func(c *runner.Config) { c.Now = o.now })
	tb.Cleanup(func() {
		rg.stopRunner()
		stop()
		srv.Close()
		wg.Wait()
		_ = st.Close()
	})
	rg.connected(tb)
	return rg
}

// startRunner runs a runner of hello's name against the server at url,
// with its data in data, and returns what stops it (and waits until it
// has).
func startRunner(tb testing.TB, url, data string, sb sandbox.Backend, limits sandbox.Limits, hello link.Hello, tune ...func(*runner.Config)) func() {
	tb.Helper()
	cfg := runner.Config{
		Server: url, Key: "good", DataDir: data, Backend: sb, SocketDir: tb.TempDir(), Limits: limits,
		Hello:      hello,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}
	for _, f := range tune {
		f(&cfg)
	}
	r, err := runner.New(cfg)
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	return sync.OnceFunc(func() {
		cancel()
		<-done
	})
}

// connected waits until the runner's connection is held and returns it.
func (rg *rig) connected(tb testing.TB) *hub.Runner {
	tb.Helper()
	var r *hub.Runner
	require.Eventually(tb, func() bool {
		var ok bool
		r, ok = rg.hub.Get(project, runnerName)
		return ok && r.Conn.Err() == nil
	}, 10*time.Second, time.Millisecond)
	return r
}

func (rg *rig) backend(tb testing.TB) environment.Backend {
	tb.Helper()
	b, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: runnerName})
	require.NoError(tb, err)
	return b
}

// remoteBackend returns a NewBackend whose every backend is a runner of
// its own (its own machine: data directory) connected to a hub of its
// own, all storing their blobs in the suite's.
func remoteBackend(sb func(testing.TB) sandbox.Backend) environmenttest.NewBackend {
	return func(tb testing.TB, blobs *environmenttest.Blobs) environment.Backend {
		tb.Helper()
		return newRig(tb, blobs, rigOptions{sandbox: sb(tb)}).backend(tb)
	}
}

func plain(testing.TB) sandbox.Backend { return sandbox.NewLocal() }

func TestRemotePlainConformance(t *testing.T) {
	environmenttest.Run(t, remoteBackend(plain))
}

func TestRemoteBwrapConformance(t *testing.T) {
	environmenttest.Bwrap(t)
	environmenttest.Run(t, remoteBackend(environmenttest.Bwrap))
}

// The cost of a shell call on a runner over loopback: issue 20's added
// latency is this minus the local backend's (BenchmarkLocalPlainRun,
// BenchmarkLocalBwrapRun in internal/environment).
func BenchmarkRemotePlainRun(b *testing.B) {
	environmenttest.BenchmarkRun(b, remoteBackend(plain))
}

func BenchmarkRemoteBwrapRun(b *testing.B) {
	environmenttest.BenchmarkRun(b, remoteBackend(environmenttest.Bwrap))
}

func BenchmarkRemotePlainReadFile(b *testing.B) {
	environmenttest.BenchmarkReadFile(b, remoteBackend(plain))
}
