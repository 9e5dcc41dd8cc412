package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
)

// streamRecorder is an in-process http.ResponseWriter for a stream served
// in a synctest bubble (a real connection's reads are not durable
// blocking, so virtual time would stand still while the client waits):
// it keeps what was flushed, safe to read while the handler writes.
type streamRecorder struct {
	mu      sync.Mutex
	header  http.Header
	status  int
	pending bytes.Buffer
	flushed bytes.Buffer
}

func (r *streamRecorder) Header() http.Header { return r.header }
func (r *streamRecorder) WriteHeader(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}
func (r *streamRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending.Write(p)
}
func (r *streamRecorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushed.Write(r.pending.Bytes())
	r.pending.Reset()
}

// sent returns what the client has been sent so far.
func (r *streamRecorder) sent() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushed.String()
}

// TestSynctestStreamPingInterval: with the server's own ticker, an event
// stream that has caught up pings exactly every PingInterval (not a moment
// before), an event appended between pings is sent at once, and the ticker
// keeps its rhythm.
func TestSynctestStreamPingInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTreeBackend()
		root := b.create("")
		b.emit(root, 1)
		svc := &treeService{b: b, trees: app.NewTrees(b, nil)}
		srv := server.New(svc, noIdempotency{}, &server.Config{PingInterval: 42 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(context.Background())
		rec := &streamRecorder{header: http.Header{}}
		done := make(chan struct{})
		// A loopback peer naming a loopback host: what a server without
		// API keys serves.
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:8080/v1/sessions/"+root+"/events/stream", nil)
		req.RemoteAddr = "127.0.0.1:50000"
		go func() {
			defer close(done)
			srv.ServeHTTP(rec, req)
		}()
		pings := func() int { return strings.Count(rec.sent(), ": ping\n\n") }
		frames := func() int { return strings.Count(rec.sent(), "\nevent: ") }

		synctest.Wait()
		require.Equal(t, http.StatusOK, rec.status)
		require.Equal(t, 2, frames(), "the journal so far, at once")
		require.Zero(t, pings())

		settle(42*time.Second - time.Nanosecond)
		require.Zero(t, pings(), "pinged before the interval")
		settle(time.Nanosecond)
		require.Equal(t, 1, pings(), "pinged at 42 s")

		settle(8 * time.Second) // 50 s
		b.emit(root, 1)
		synctest.Wait()
		require.Equal(t, 3, frames(), "an event appended between pings is sent at once")
		require.Equal(t, 1, pings())

		settle(34*time.Second - time.Nanosecond) // just before 84 s
		require.Equal(t, 1, pings())
		settle(time.Nanosecond)
		require.Equal(t, 2, pings(), "the next ping at 84 s: an event does not move the rhythm")
		require.True(t, strings.HasSuffix(rec.sent(), ": ping\n\n"))

		cancel() // the client leaves: the handler returns
		<-done
		srv.Shutdown()
	})
}

// settle lets virtual time pass by d, then waits until every goroutine of
// the bubble is blocked: whatever was due by then has happened.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}
