package client

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		baseURL string
		cfg     *Config
		wantErr string
	}{
		{"empty", "", nil, "baseURL is empty"},
		{"no scheme", "127.0.0.1:8080", nil, "baseURL"},
		{"bad scheme", "ftp://host", nil, "scheme must be http or https"},
		{"no host", "http://", nil, "host is empty"},
		{"credentials", "http://user:pw@host", nil, "Config.APIKey"},
		{"query", "http://host/?x=1", nil, "query or a fragment"},
		{"unparsable", "http://host:port:x", nil, "baseURL"},
		{"negative min backoff", "http://host", &Config{MinBackoff: -1}, "Config.MinBackoff"},
		{"negative max backoff", "http://host", &Config{MaxBackoff: -1}, "Config.MaxBackoff"},
		{"min above max", "http://host", &Config{MinBackoff: time.Minute, MaxBackoff: time.Second}, "Config.MinBackoff 1m0s is above Config.MaxBackoff"},
		{"negative idle timeout", "http://host", &Config{StreamIdleTimeout: -time.Second}, "Config.StreamIdleTimeout"},
		{"api key with newline", "http://host", &Config{APIKey: "k\nX-Evil: 1"}, "Config.APIKey"},
		{"user agent with newline", "http://host", &Config{UserAgent: "a\r\nb"}, "Config.UserAgent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(tt.baseURL, tt.cfg)
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, c)
		})
	}
}

func TestNewKeepsPathPrefix(t *testing.T) {
	t.Parallel()
	c, err := New("https://example.test/longhaul/", nil)
	require.NoError(t, err)
	require.Equal(t, "https://example.test/longhaul/v1/sessions/a%2Fb", c.endpoint(nil, "v1", "sessions", "a/b"))
	require.Equal(t, DefaultMaxRetries, c.maxRetries)
	require.Equal(t, DefaultStreamIdleTimeout, c.idleTimeout)

	c, err = New("http://127.0.0.1:8080", &Config{MaxRetries: -1})
	require.NoError(t, err)
	require.Zero(t, c.maxRetries)
}

// recorder is a handler that answers from a script of responses and records
// every request.
type recorder struct {
	mu      sync.Mutex
	reqs    []recorded
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

type recorded struct {
	method string
	path   string
	query  string
	header http.Header
	body   string
}

func newRecorder(respond func(n int, w http.ResponseWriter, r *http.Request)) *recorder {
	return &recorder{respond: respond}
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.reqs)
	rc.reqs = append(rc.reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(body)})
	rc.mu.Unlock()
	rc.respond(n, w, r)
}

func (rc *recorder) all() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.reqs...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func TestPostRetriesWithOneIdempotencyKey(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if n < 2 {
			writeAPIError(w, http.StatusServiceUnavailable, lt.CodeUnavailable, "draining")
			return
		}
		writeJSON(w, http.StatusCreated, lt.Session{ID: "ses_1", Status: lt.SessionQueued})
	})
	srv := startServer(t, rc)
	c, sl := newTestClient(t, srv.URL, nil)

	s, err := c.CreateSession(t.Context(), &lt.CreateSessionRequest{Agent: "researcher", Input: "go"})
	require.NoError(t, err)
	require.Equal(t, "ses_1", s.ID)

	reqs := rc.all()
	require.Len(t, reqs, 3, "two 503s, then success")
	key := reqs[0].header.Get("Idempotency-Key")
	require.NotEmpty(t, key)
	for _, r := range reqs {
		require.Equal(t, key, r.header.Get("Idempotency-Key"), "every retry of one call sends the same key")
		require.JSONEq(t, `{"agent":"researcher","input":"go"}`, r.body, "and the same body")
	}
	ds := sl.all()
	require.Len(t, ds, 2)
	require.GreaterOrEqual(t, ds[0], DefaultMinBackoff/2)
	require.LessOrEqual(t, ds[0], DefaultMinBackoff)
	require.GreaterOrEqual(t, ds[1], DefaultMinBackoff)
	require.LessOrEqual(t, ds[1], 2*DefaultMinBackoff)

	// Another logical call gets another key.
	_, err = c.CreateSession(t.Context(), &lt.CreateSessionRequest{Agent: "researcher", Input: "go"})
	require.NoError(t, err)
	reqs = rc.all()
	require.Len(t, reqs, 4)
	require.NotEmpty(t, reqs[3].header.Get("Idempotency-Key"))
	require.NotEqual(t, key, reqs[3].header.Get("Idempotency-Key"))
}

func TestWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, lt.Turn{ID: "turn_2"})
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	ctx := WithIdempotencyKey(t.Context(), "script-run-7/turn")
	for range 2 {
		_, err := c.CreateTurn(ctx, "ses_1", &lt.CreateTurnRequest{Input: "again"})
		require.NoError(t, err)
	}
	for _, r := range rc.all() {
		require.Equal(t, "script-run-7/turn", r.header.Get("Idempotency-Key"))
	}

	for _, bad := range []string{"tab\tkey", " padded", strings.Repeat("k", 256), "é"} {
		_, err := c.CreateTurn(WithIdempotencyKey(t.Context(), bad), "ses_1", &lt.CreateTurnRequest{Input: "x"})
		require.ErrorContains(t, err, "idempotency key", "key %q", bad)
	}
	require.Len(t, rc.all(), 2, "a bad key is refused before any request")
}

func TestGetCarriesNoIdempotencyKey(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, lt.Session{ID: "ses_1"})
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)
	_, err := c.GetSession(WithIdempotencyKey(t.Context(), "k"), "ses_1")
	require.NoError(t, err)
	require.Empty(t, rc.all()[0].header.Values("Idempotency-Key"))
}

func TestRequestHeaders(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			writeJSON(w, http.StatusOK, lt.List[lt.Agent]{})
			return
		}
		writeJSON(w, http.StatusOK, lt.Action{ID: "act_1"})
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, &Config{APIKey: "lh_secret", UserAgent: "longhaul-cli/1"})
	_, err := c.DecideAction(t.Context(), "ses_1", "act_1", &lt.Decision{Decision: "approve"})
	require.NoError(t, err)

	h := rc.all()[0].header
	require.Equal(t, "Bearer lh_secret", h.Get("Authorization"))
	require.Equal(t, "longhaul-cli/1", h.Get("User-Agent"))
	require.Equal(t, "application/json", h.Get("Content-Type"))
	require.Equal(t, "application/json", h.Get("Accept"))

	c, _ = newTestClient(t, srv.URL, nil)
	_, err = c.ListAgents(t.Context(), "")
	require.NoError(t, err)
	h = rc.all()[1].header
	require.Empty(t, h.Values("Authorization"), "no key configured, none sent")
	require.Equal(t, DefaultUserAgent, h.Get("User-Agent"))
}

func TestRetriesTransientStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w.WriteHeader(status) // a proxy's bare answer, no JSON
					return
				}
				writeJSON(w, http.StatusOK, lt.List[lt.Agent]{Data: []lt.Agent{{Name: "a", Version: 1}}})
			})
			srv := startServer(t, rc)
			c, sl := newTestClient(t, srv.URL, nil)
			l, err := c.ListAgents(t.Context(), "")
			require.NoError(t, err)
			require.Equal(t, "a", l.Data[0].Name)
			require.Len(t, rc.all(), 2)
			require.Len(t, sl.all(), 1)
		})
	}
}

func TestDoesNotRetryOtherStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusInternalServerError} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
				writeAPIError(w, status, codeForStatus(status), "no")
			})
			srv := startServer(t, rc)
			c, sl := newTestClient(t, srv.URL, nil)
			_, err := c.Cancel(t.Context(), "ses_1", nil)
			var ae *APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, status, ae.Status)
			require.Len(t, rc.all(), 1)
			require.Empty(t, sl.all())
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusServiceUnavailable, lt.CodeUnavailable, "storage down")
	})
	srv := startServer(t, rc)
	c, sl := newTestClient(t, srv.URL, &Config{MaxRetries: 2})
	_, err := c.GetSession(t.Context(), "ses_1")
	require.EqualError(t, err, "get session ses_1: after 3 attempts: unavailable (503): storage down")
	require.Len(t, rc.all(), 3)
	require.Len(t, sl.all(), 2)

	c, sl = newTestClient(t, srv.URL, &Config{MaxRetries: -1})
	_, err = c.GetSession(t.Context(), "ses_1")
	require.EqualError(t, err, "get session ses_1: unavailable (503): storage down")
	require.Len(t, rc.all(), 4)
	require.Empty(t, sl.all())
}

func TestRetryAfterIsHonoredAndCapped(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			w.Header().Set("Retry-After", "3")
			writeAPIError(w, http.StatusTooManyRequests, lt.CodeRateLimited, "slow down")
		case 1:
			w.Header().Set("Retry-After", "3600")
			writeAPIError(w, http.StatusTooManyRequests, lt.CodeRateLimited, "slow down")
		default:
			writeJSON(w, http.StatusOK, lt.Session{ID: "ses_1"})
		}
	})
	srv := startServer(t, rc)
	c, sl := newTestClient(t, srv.URL, nil)
	_, err := c.GetSession(t.Context(), "ses_1")
	require.NoError(t, err)
	require.Equal(t, []time.Duration{3 * time.Second, DefaultMaxBackoff}, sl.all())
}

// A 409 with a Retry-After is the server's "this Idempotency-Key is
// running elsewhere": the call is retried with the same key, and its
// answer comes to the retry. A 409 without one (another body, a decided
// action) is final (TestDoesNotRetryOtherStatuses).
func TestRetriesAnIdempotencyKeyRunningElsewhere(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			w.Header().Set("Retry-After", "2")
			writeAPIError(w, http.StatusConflict, lt.CodeConflict, "a request with Idempotency-Key \"k\" is running")
			return
		}
		writeJSON(w, http.StatusCreated, lt.Session{ID: "ses_1", Status: lt.SessionQueued})
	})
	srv := startServer(t, rc)
	c, sl := newTestClient(t, srv.URL, nil)
	s, err := c.CreateSession(t.Context(), &lt.CreateSessionRequest{Agent: "researcher", Input: "go"})
	require.NoError(t, err)
	require.Equal(t, "ses_1", s.ID)
	reqs := rc.all()
	require.Len(t, reqs, 2)
	require.Equal(t, reqs[0].header.Get("Idempotency-Key"), reqs[1].header.Get("Idempotency-Key"))
	require.Equal(t, []time.Duration{2 * time.Second}, sl.all())
}

func TestRetriesConnectionRefused(t *testing.T) {
	t.Parallel()
	// Reserve a port, then free it: nothing listens there until the
	// first backoff sleep brings the server up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, lt.Agent{Name: "a", Version: 1})
	})
	var ds []time.Duration
	c, err := New("http://"+addr, &Config{HTTPClient: ownTransport(t), Sleep: func(ctx context.Context, d time.Duration) error {
		if len(ds) == 0 {
			startServerAt(t, rc, addr)
		}
		ds = append(ds, d)
		return ctx.Err()
	}})
	require.NoError(t, err)
	a, err := c.PutAgent(t.Context(), &lt.PutAgentRequest{Name: "a", Spec: lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted"}}})
	require.NoError(t, err)
	require.Equal(t, 1, a.Version)
	require.Len(t, ds, 1)
	require.Len(t, rc.all(), 1)
}

func TestContextEndsRetries(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusServiceUnavailable, lt.CodeUnavailable, "down")
	})
	srv := startServer(t, rc)
	ctx, cancel := context.WithCancel(t.Context())
	c, err := New(srv.URL, &Config{HTTPClient: ownTransport(t), Sleep: func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}})
	require.NoError(t, err)
	_, err = c.GetSession(ctx, "ses_1")
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, rc.all(), 1)
}

func TestHealthAndReady(t *testing.T) {
	t.Parallel()
	ready := false
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	readyCalls := 0
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		readyCalls++
		if !ready {
			writeAPIError(w, http.StatusServiceUnavailable, lt.CodeUnavailable, "migrations pending")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	srv := startServer(t, mux)
	c, sl := newTestClient(t, srv.URL, nil)

	require.NoError(t, c.Health(t.Context()))
	err := c.Ready(t.Context())
	require.EqualError(t, err, "ready: unavailable (503): migrations pending")
	require.Empty(t, sl.all(), "a probe is not retried")

	mu.Lock()
	ready = true
	mu.Unlock()
	require.NoError(t, c.Ready(t.Context()))
	mu.Lock()
	require.Equal(t, 2, readyCalls)
	mu.Unlock()
}

func TestUndecodableResponse(t *testing.T) {
	t.Parallel()
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<html>hello</html>")
	}))
	c, _ := newTestClient(t, srv.URL, nil)
	_, err := c.GetSession(t.Context(), "ses_1")
	require.ErrorContains(t, err, "get session ses_1: decode response (status 200)")
}
