package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// testKey is the API key the tests send; no error may ever show it.
const testKey = "sk-test-0123456789abcdefSECRET"

// call is one request a test server received.
type call struct {
	Method string
	Path   string
	Header http.Header
	Body   map[string]any
}

// JSON is the value at key of the request body, as JSON, for JSONEq.
func (c call) JSON(t *testing.T, key string) string {
	t.Helper()
	v, ok := c.Body[key]
	require.True(t, ok, "request body has no %q: %v", key, c.Body)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// fakeAPI is an httptest server that records every request and answers the
// Nth one with the Nth handler (the last one answers any further requests).
type fakeAPI struct {
	*httptest.Server
	mu    sync.Mutex
	calls []call
}

func newFakeAPI(t *testing.T, handlers ...http.HandlerFunc) *fakeAPI {
	t.Helper()
	require.NotEmpty(t, handlers)
	f := &fakeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "request body is not JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		n := len(f.calls)
		f.calls = append(f.calls, call{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		handlers[min(n, len(handlers)-1)](w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// Calls returns the requests received so far.
func (f *fakeAPI) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// sse answers with a text/event-stream body: each frame is written and
// flushed as it comes, as a real server streams.
func sse(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		for _, f := range frames {
			_, _ = io.WriteString(w, f)
			fl.Flush()
		}
	}
}

// sseCut streams frames, then drops the connection without ending the
// chunked body: the client sees the stream break off mid-response.
func sseCut(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sse(frames...)(w, r)
		panic(http.ErrAbortHandler)
	}
}

// jsonError answers status with body and the given headers (pairs).
func jsonError(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// event is one Responses API server-sent event: the event line names the
// type, and the data is the JSON object (which repeats it).
func event(data string) string {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(data), &head); err != nil || head.Type == "" {
		panic(fmt.Sprintf("bad event fixture %q: %v", data, err))
	}
	return "event: " + head.Type + "\ndata: " + data + "\n\n"
}

// chunk is one Chat Completions server-sent event (data only).
func chunk(data string) string {
	if !json.Valid([]byte(data)) {
		panic(fmt.Sprintf("bad chunk fixture %q", data))
	}
	return "data: " + data + "\n\n"
}

const doneFrame = "data: [DONE]\n\n"

// respond calls p against f with a request for spec (BaseURL set to f's URL
// plus suffix).
func respond(t *testing.T, p *Provider, f *fakeAPI, suffix string, req *model.Request) (*model.Response, error) {
	t.Helper()
	req.Spec.BaseURL = f.URL + suffix
	return p.Respond(t.Context(), req)
}

// requireModelError asserts err is a *model.Error of kind and returns it.
func requireModelError(t *testing.T, err error, kind model.ErrorKind) *model.Error {
	t.Helper()
	require.Error(t, err)
	me, ok := model.AsError(err)
	require.True(t, ok, "not a *model.Error: %T %v", err, err)
	require.Equal(t, kind, me.Kind, "error: %v", err)
	require.NotContains(t, err.Error(), testKey)
	require.NotContains(t, err.Error(), "SECRET")
	require.NotContains(t, err.Error(), "\n")
	return me
}

// deltas collects what OnDelta receives.
type deltas struct {
	text, reasoning []string
}

func (d *deltas) on(x model.Delta) {
	if x.Text != "" {
		d.text = append(d.text, x.Text)
	}
	if x.Reasoning != "" {
		d.reasoning = append(d.reasoning, x.Reasoning)
	}
}

func openaiSpec(name string) lt.ModelSpec {
	return lt.ModelSpec{Provider: NameOpenAI, Name: name}
}

func float(f float64) *float64 { return &f }
