package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// slowBackend holds CreateSession and ListSessions until release is
// closed, and records whether their context ended meanwhile.
type slowBackend struct {
	server.Backend
	entered   chan struct{}
	release   chan struct{}
	cancelled atomic.Bool
}

func (b *slowBackend) hold(ctx context.Context) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		b.cancelled.Store(true)
	}
}

func (b *slowBackend) ListSessions(ctx context.Context, p server.ListSessionsParams) (*lt.List[lt.Session], error) {
	b.hold(ctx)
	return b.Backend.ListSessions(ctx, p)
}

func (b *slowBackend) CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
	b.hold(ctx)
	return b.Backend.CreateSession(ctx, req)
}

// shortTimeouts is an http.Server's read and write timeouts in these tests.
const shortTimeout = 100 * time.Millisecond

func TestReadTimeoutDoesNotCutOffAHandler(t *testing.T) {
	t.Parallel()
	sb := &slowBackend{entered: make(chan struct{}, 2), release: make(chan struct{})}
	h := newHarness(t, harnessOpts{
		wrap:       func(b server.Backend) server.Backend { sb.Backend = b; return sb },
		httpServer: func(s *http.Server) { s.ReadTimeout = shortTimeout },
	})
	results := make(chan *response, 2)
	go func() { results <- h.get("/v1/sessions") }()
	go func() { results <- h.post("/v1/sessions", scriptedSession("slow")) }()
	<-sb.entered
	<-sb.entered
	// ReadTimeout's deadline must not outlive the body: its expiry during
	// the handler would end the request's context (net/http clears it when
	// its background read of the connection starts).
	require.Never(t, sb.cancelled.Load, 5*shortTimeout, shortTimeout/10, "a handler's context ended at the read timeout")
	close(sb.release)
	statuses := []int{(<-results).status, (<-results).status}
	require.ElementsMatch(t, []int{http.StatusOK, http.StatusCreated}, statuses)
}

func TestEventStreamOutlivesReadAndWriteTimeouts(t *testing.T) {
	t.Parallel()
	ticks := make(chan time.Time)
	h := newHarness(t, harnessOpts{
		ticker:     func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} },
		httpServer: func(s *http.Server) { s.ReadTimeout, s.WriteTimeout = shortTimeout, shortTimeout },
	})
	// The session is made through the App, not the API: the timeouts are
	// the stream's to outlive, and on a loaded machine creating a session
	// can take longer than they allow a plain request.
	ctx := app.WithCaller(t.Context(), app.LibraryCaller)
	var req lt.CreateSessionRequest
	require.NoError(t, json.Unmarshal([]byte(scriptedSession("stream")), &req))
	sess, err := h.app.CreateSession(ctx, &req)
	require.NoError(t, err)
	var n int64
	require.Eventually(t, func() bool {
		got, err := h.app.GetSession(ctx, sess.ID)
		require.NoError(t, err)
		n = got.LastEventSeq
		return got.Status == lt.SessionIdle
	}, 15*time.Second, 10*time.Millisecond, "the session did not become idle")
	s := h.openStream(sess.ID, "", map[string]string{"Last-Event-ID": strconv.FormatInt(n, 10)})
	frames := make(chan sseFrame, 16)
	ended := make(chan error, 1)
	go func() {
		for {
			f, err := s.next()
			if err != nil {
				ended <- err
				return
			}
			frames <- f
		}
	}()
	require.Never(t, func() bool { return len(ended) > 0 }, 5*shortTimeout, shortTimeout/10, "the stream ended at a timeout")
	ticks <- time.Time{}
	select {
	case f := <-frames:
		require.Equal(t, "ping", f.comment)
	case err := <-ended:
		t.Fatalf("the stream ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no ping within 10 s")
	}
}

func TestSlowBodyLosesItsConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{httpServer: func(s *http.Server) { s.ReadTimeout = shortTimeout }})
	// Taken before the dial: the server's read deadline starts when it
	// accepts the connection, which may come before Dial returns here.
	start := time.Now()
	conn, err := net.Dial("tcp", h.ts.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /v1/sessions HTTP/1.1\r\nHost: "+h.ts.Listener.Addr().String()+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	require.NoError(t, err)
	// Then nothing: the server answers (the body could not be read) and
	// closes the connection once the read timeout passes.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		_, err = io.Copy(io.Discard, res.Body)
		require.NoError(t, err)
		_, err = conn.Read(make([]byte, 1))
	}
	require.True(t, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err), "want the connection closed, got %v", err)
	require.GreaterOrEqual(t, time.Since(start), shortTimeout)
	require.Empty(t, decode[lt.List[lt.Session]](t, h.get("/v1/sessions")).Data)
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

func TestEventStreamEndsWhenItsClientStopsReading(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{
		cfg: &server.Config{StreamWriteTimeout: shortTimeout},
		// A small send buffer, so that a reader that stops blocks the
		// server's writes after a few events rather than megabytes.
		httpServer: func(s *http.Server) {
			s.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
				if tc, ok := c.(*net.TCPConn); ok {
					require.NoError(t, tc.SetWriteBuffer(4<<10))
				}
				return ctx
			}
		},
	})
	sess := h.createSession("stalled reader")
	h.waitStatus(sess.ID, lt.SessionIdle)
	streamPath := "/v1/sessions/" + sess.ID + "/events/stream"
	// Opened and never read: once the socket buffers on both sides are
	// full, the server's next write blocks, and its deadline ends the
	// stream, which the request's log line shows.
	h.openStream(sess.ID, "", nil)
	payload := `{"name":"bulk","payload":"` + strings.Repeat("x", 60<<10) + `"}`
	ended := func() bool {
		return strings.Contains(h.logs.String(), "msg=request method=GET path="+streamPath+" status=200")
	}
	// A few events fill the small buffers; the stream's client gives up
	// only after 20 s (openStream), so an end within 5 s is the server's.
	for i := 0; i < 30 && !ended(); i++ {
		r := h.post("/v1/sessions/"+sess.ID+"/signals", payload)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	}
	require.Eventually(t, ended, 5*time.Second, shortTimeout/10, "the stalled stream was not ended")
}
