package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// harness is the real stack: a SQLite store and an engine in t.TempDir(),
// served by a Server behind an httptest.Server.
type harness struct {
	t      *testing.T
	store  *sqlite.Store
	eng    *engine.Engine
	app    *app.App
	srv    *server.Server
	ts     *httptest.Server
	logs   *syncBuffer
	apiKey string // sent as a bearer token when set
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type harnessOpts struct {
	cfg *server.Config
	// wrap lets a test put a Backend in front of the engine.
	wrap func(server.Backend) server.Backend
	// ticker, if set, replaces the event streams' ping ticker.
	ticker func(d time.Duration) (<-chan time.Time, func())
	// clock, if set, is the engine's clock.
	clock engine.Clock
	// httpServer, if set, adjusts the http.Server before it starts
	// (timeouts).
	httpServer func(*http.Server)
}

func newHarness(t *testing.T, opts harnessOpts) *harness {
	t.Helper()
	st, eng := apptest.Engine(t, opts.clock)

	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	var cfg server.Config
	if opts.cfg != nil {
		cfg = *opts.cfg
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := apptest.New(t, st, eng, nil)
	if cfg.Keys == nil {
		cfg.Keys = a
	}
	if cfg.Audit == nil {
		cfg.Audit = a // as internal/node wires it
	}
	var b server.Backend = a
	if opts.wrap != nil {
		b = opts.wrap(b)
	}
	srv := server.New(b, st, &cfg)
	if opts.ticker != nil {
		server.SetTicker(srv, opts.ticker)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.RegisterOnShutdown(srv.Shutdown)
	if opts.httpServer != nil {
		opts.httpServer(ts.Config)
	}
	ts.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		ts.Close()
	})
	return &harness{t: t, store: st, eng: eng, app: a, srv: srv, ts: ts, logs: logs}
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) do(method, path string, body []byte, header map[string]string) *response {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.ts.URL+path, rd)
	require.NoError(h.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.apiKey)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := h.ts.Client().Do(req)
	require.NoError(h.t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	return &response{status: res.StatusCode, header: res.Header, body: data}
}

func (h *harness) get(path string) *response { return h.do(http.MethodGet, path, nil, nil) }

func (h *harness) post(path, body string) *response {
	return h.do(http.MethodPost, path, []byte(body), nil)
}

// decode decodes a response body strictly into T, so a field the API sends
// that the wire types lack fails the test.
func decode[T any](t *testing.T, r *response) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "body: %s", r.body)
	return v
}

// requireError asserts an error response: status, the error shape and only
// it, the code, and the field.
func requireError(t *testing.T, r *response, status int, code, field string) lt.Error {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	e := decode[lt.ErrorResponse](t, r)
	require.Equal(t, code, e.Error.Code, "body: %s", r.body)
	require.Equal(t, field, e.Error.Field, "body: %s", r.body)
	require.NotEmpty(t, e.Error.Message)
	return e.Error
}

// scriptedSession is a create-session body with an inline scripted agent:
// it writes notes.md, delivers it with finish, and the turn completes.
func scriptedSession(input string) string {
	return `{
	  "agent_spec": {
	    "model": {"provider": "scripted", "name": "demo", "script": [
	      {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "# Notes\n\nhello"}}]},
	      {"tool_calls": [{"name": "finish", "arguments": {"summary": "notes written", "artifacts": ["notes.md"]}}]}
	    ]},
	    "instructions": "Write notes.",
	    "tools": [{"name": "write_file"}, {"name": "finish"}]
	  },
	  "input": ` + strconv.Quote(input) + `,
	  "goal": "notes exist",
	  "constraints": ["be brief"],
	  "acceptance_criteria": ["notes.md exists"],
	  "budget": {"max_cost_usd": 5, "soft_cost_usd": 2},
	  "metadata": {"ticket": "OPS-12"}
	}`
}

func (h *harness) createSession(input string) lt.Session {
	h.t.Helper()
	r := h.post("/v1/sessions", scriptedSession(input))
	require.Equal(h.t, http.StatusCreated, r.status, "body: %s", r.body)
	return decode[lt.Session](h.t, r)
}

// waitStatus polls the session until its status is want.
func (h *harness) waitStatus(id string, want lt.SessionStatus) lt.Session {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := h.get("/v1/sessions/" + id)
		require.Equal(h.t, http.StatusOK, r.status, "body: %s", r.body)
		s := decode[lt.Session](h.t, r)
		if s.Status == want {
			return s
		}
		require.False(h.t, s.Status.Terminal() && s.Status != want, "session ended as %s, want %s: %s", s.Status, want, r.body)
		require.True(h.t, time.Now().Before(deadline), "session %s still %s, want %s", id, s.Status, want)
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an event
	}
}

// allEvents reads the whole journal through the list endpoint, following
// next_cursor, and returns each event's exact JSON.
func (h *harness) allEvents(id string, limit int) []json.RawMessage {
	h.t.Helper()
	var out []json.RawMessage
	path := "/v1/sessions/" + id + "/events?limit=" + strconv.Itoa(limit)
	for {
		r := h.get(path)
		require.Equal(h.t, http.StatusOK, r.status, "body: %s", r.body)
		page := decode[lt.List[json.RawMessage]](h.t, r)
		out = append(out, page.Data...)
		if page.NextCursor == nil {
			require.Less(h.t, len(page.Data), limit, "a full page has a next_cursor")
			return out
		}
		require.Len(h.t, page.Data, limit)
		path = "/v1/sessions/" + id + "/events?limit=" + strconv.Itoa(limit) + "&cursor=" + *page.NextCursor
	}
}

// sseFrame is one parsed server-sent event, or a comment.
type sseFrame struct {
	id, event, data string
	comment         string
}

// sseStream reads frames from an open event stream.
type sseStream struct {
	t      *testing.T
	res    *http.Response
	rd     *bufio.Reader
	cancel context.CancelFunc
}

// openStream opens the session's event stream with optional extra headers
// and query, failing unless it is a 200 event stream.
func (h *harness) openStream(id, query string, header map[string]string) *sseStream {
	h.t.Helper()
	// The deadline turns a stream that never delivers into a failure, not
	// a hung test.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.ts.URL+"/v1/sessions/"+id+"/events/stream"+query, nil)
	require.NoError(h.t, err)
	if h.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.apiKey)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := h.ts.Client().Do(req)
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusOK, res.StatusCode)
	require.Equal(h.t, "text/event-stream", res.Header.Get("Content-Type"))
	require.Equal(h.t, "no-cache", res.Header.Get("Cache-Control"))
	require.Equal(h.t, "no", res.Header.Get("X-Accel-Buffering"))
	s := &sseStream{t: h.t, res: res, rd: bufio.NewReader(res.Body), cancel: cancel}
	h.t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	_ = s.res.Body.Close()
}

// next reads one frame (an event or a comment). io.EOF when the server ended
// the stream.
func (s *sseStream) next() (sseFrame, error) {
	var f sseFrame
	sawLine := false
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if sawLine {
				return f, nil
			}
			continue
		}
		sawLine = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			f.comment = value
		case "id":
			f.id = value
		case "event":
			f.event = value
		case "data":
			require.Empty(s.t, f.data, "one data line per event")
			f.data = value
		default:
			s.t.Fatalf("unexpected stream line %q", line)
		}
	}
}

// nextEvent reads frames until an event (skipping comments).
func (s *sseStream) nextEvent() sseFrame {
	s.t.Helper()
	for {
		f, err := s.next()
		require.NoError(s.t, err)
		if f.comment == "" {
			return f
		}
	}
}
