package anthropic

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// testKey is the API key of every test request; no error may contain it.
const testKey = "sk-ant-api03-TESTKEY-0123456789abcdef"

// received is one request the fake Messages API got.
type received struct {
	Method string
	Path   string
	Header http.Header
	Body   map[string]any
}

// fakeAPI is a local server that speaks the Messages API's wire format: it
// records each request and answers with the handler the test gives.
type fakeAPI struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []received
}

func newFakeAPI(t *testing.T, handler http.HandlerFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		var body map[string]any
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &body); err != nil {
				http.Error(w, "request body is not JSON", http.StatusBadRequest)
				return
			}
		}
		f.mu.Lock()
		f.requests = append(f.requests, received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// only returns the single request the server received.
func (f *fakeAPI) only(t *testing.T) received {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.requests, 1)
	return f.requests[0]
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// provider returns a Provider that talks to f, with a fixed clock.
func (f *fakeAPI) provider() *Provider {
	return New(Config{HTTPClient: f.srv.Client(), Now: fixedNow})
}

// spec is a model spec pointing at f.
func (f *fakeAPI) spec() lt.ModelSpec {
	return lt.ModelSpec{Provider: ProviderName, Name: "claude-sonnet-4-5", BaseURL: f.srv.URL}
}

var fixedTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return fixedTime }

// fixture reads a recorded SSE stream from testdata.
func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}

// streamBody answers with body as an event stream, flushed at once.
func streamBody(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush()
	}
}

// streamThenAbort answers with body as an event stream, then breaks the
// connection without ending the response, as a dropped connection does.
func streamThenAbort(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		streamBody(body)(w, r)
		panic(http.ErrAbortHandler)
	}
}

// errorBody answers with an API error in Anthropic's error shape.
func errorBody(status int, errType, message string, headers map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
		w.WriteHeader(status)
		body, _ := json.Marshal(map[string]any{
			"type":       "error",
			"error":      map[string]any{"type": errType, "message": message},
			"request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
		})
		_, _ = w.Write(body)
	}
}

// event is one SSE event whose name is its data's "type".
func event(data string) string {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(data), &head); err != nil {
		panic("test event is not JSON: " + data)
	}
	return "event: " + head.Type + "\ndata: " + data + "\n\n"
}

func events(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		b.WriteString(event(d))
	}
	return b.String()
}

// requireModelError asserts err is a *model.Error of kind, returns it, and
// checks the invariants every error keeps: no key, one short line.
func requireModelError(t *testing.T, err error, kind model.ErrorKind) *model.Error {
	t.Helper()
	require.Error(t, err)
	me, ok := model.AsError(err)
	require.True(t, ok, "want *model.Error, got %T: %v", err, err)
	require.Equal(t, kind, me.Kind, "error: %v", err)
	requireClean(t, err)
	return me
}

// requireClean asserts an error's text has no key and is one short line.
func requireClean(t *testing.T, err error) {
	t.Helper()
	text := err.Error()
	require.NotContains(t, text, testKey)
	require.NotContains(t, text, "TESTKEY")
	require.NotContains(t, text, "\n")
	require.LessOrEqual(t, len(text), model.MaxMessageLen+60, "error too long: %s", text)
}

// decode turns a JSON literal into the generic form the server records.
func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}
