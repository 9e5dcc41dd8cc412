package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The adversarial suite (adversarial_<area>_test.go, tests named
// TestAdversarial<Area>_<Case>) plays one attacker per case against the
// real binary: a model driven by the scripted provider that obeys the
// instructions it finds (in its input, a page, a tool's output), or a
// hostile API client. A case never takes the server's word that it held:
// it asserts from outside — a recorder on loopback that must receive
// nothing (or exactly what was allowed), the host's state (its processes,
// files, /proc), and the journal read through the API.
//
// To add a case: start a server (startServer, or startServerWithEnv; add
// "--sandbox", "bwrap" after needTools where the attack runs commands),
// give the attacker its target (newRecorder, and its network() to let a
// session reach it), script the model (attackScript of toolCalls of
// toolCall steps, ending in finalText), run it (runSession, then
// requireStatus), and assert on the recorder, the host and eventsOf the
// journal. Keep the test's name short: its temporary directory holds the
// egress proxy's socket, whose path may not pass 103 bytes.

// recorder is a loopback HTTP server that records every connection made
// to it and every request on one (method, path, headers, body): what an
// attack managed to send out.
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	conns int
	reqs  []recordedRequest
}

// recordedRequest is one request a recorder got.
type recordedRequest struct {
	Method string
	Path   string
	URI    string // the path with its query
	Header http.Header
	Body   string
}

func (r recordedRequest) String() string {
	return r.Method + " " + r.URI + " auth=" + r.Header.Get("Authorization") + " " + r.Body
}

// newRecorder starts a recorder that answers every request with reply, or,
// when reply is nil, with 200 "recorded". It is closed when the test ends.
func newRecorder(t *testing.T, reply http.HandlerFunc) *recorder {
	t.Helper()
	r := &recorder{}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recordedRequest{Method: req.Method, Path: req.URL.Path, URI: req.URL.RequestURI(), Header: req.Header.Clone(), Body: string(b)})
		r.mu.Unlock()
		if reply == nil {
			fmt.Fprint(w, "recorded")
			return
		}
		reply(w, req)
	}))
	// Connections are counted apart from requests: an attack that only
	// connects (or sends something that is not HTTP) got out all the same.
	r.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.mu.Lock()
			r.conns++
			r.mu.Unlock()
		}
	}
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	return r
}

// replyWith is a recorder's answer: status and body, as JSON when the body
// is a JSON object (a model API's error, so that a model call that does
// reach the recorder ends the turn at once).
func replyWith(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

// url is the recorder's base URL, http://127.0.0.1:PORT.
func (r *recorder) url() string { return r.srv.URL }

// hostPort is the recorder's 127.0.0.1:PORT.
func (r *recorder) hostPort() string { return r.srv.Listener.Addr().String() }

func (r *recorder) port() int { return r.srv.Listener.Addr().(*net.TCPAddr).Port }

// network lets a session reach the recorder (and nothing else) through the
// egress proxy.
func (r *recorder) network() *lt.Environment {
	return &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{r.port()}}}
}

// requests returns the requests received so far, in order.
func (r *recorder) requests() []recordedRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedRequest(nil), r.reqs...)
}

// all renders the requests received so far, for a failure message.
func (r *recorder) all() []string {
	var out []string
	for _, req := range r.requests() {
		out = append(out, req.String())
	}
	return out
}

// count is how many requests for path arrived.
func (r *recorder) count(path string) int {
	n := 0
	for _, req := range r.requests() {
		if req.Path == path {
			n++
		}
	}
	return n
}

// requireNone fails if anything reached the recorder: a request, or only a
// connection.
func (r *recorder) requireNone(t *testing.T, msgAndArgs ...any) {
	t.Helper()
	r.mu.Lock()
	conns, reqs := r.conns, len(r.reqs)
	r.mu.Unlock()
	if conns != 0 || reqs != 0 {
		require.Fail(t, fmt.Sprintf("the recorder got %d connection(s), requests %v", conns, r.all()), msgAndArgs...)
	}
}

// attackScript is a scripted model's script: one step per model call, in
// order (toolCalls steps, then a finalText).
func attackScript(t *testing.T, steps ...any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(steps)
	require.NoError(t, err)
	return raw
}

// toolCalls is a step that asks for the tool calls given, at once.
func toolCalls(calls ...any) map[string]any { return map[string]any{"tool_calls": calls} }

// toolCall is one tool call of a step.
func toolCall(name string, args any) map[string]any {
	return map[string]any{"name": name, "arguments": args}
}

// finalText is a step that answers text and ends the turn.
func finalText(text string) map[string]any { return map[string]any{"text": text} }

// shellStep is a step that runs command with the shell tool.
func shellStep(command string) map[string]any {
	return toolCalls(toolCall("shell", map[string]any{"command": command}))
}

// proxyCurl is a curl command line that requests target through the
// sandbox's egress proxy ($HTTP_PROXY; the sandbox's NO_PROXY exempts
// loopback, where recorders live, hence an empty --noproxy), giving up after
// seconds. opts (a method, headers, a body, -w) go before the target, which
// is written as given: quote it with shellQuote where it needs it.
func proxyCurl(seconds int, target string, opts ...string) string {
	cmd := `curl -s -m ` + strconv.Itoa(seconds) + ` --noproxy '' -x "$HTTP_PROXY" `
	for _, o := range opts {
		cmd += o + " "
	}
	return cmd + target
}

// curlEveryWay is a shell command that tries target through the sandbox's
// proxy and then directly (which must find no network at all), and
// succeeds whatever came of it.
func curlEveryWay(seconds int, target string) string {
	return proxyCurl(seconds, target) + `; curl -s -m ` + strconv.Itoa(seconds) + ` --noproxy '*' ` + target + `; true`
}

// haveTools reports whether every one of tools is on PATH. Under CI=true a
// missing one fails the test (.ci/run installs them all); elsewhere it is
// logged, saying what goes untested.
func haveTools(t *testing.T, untested string, tools ...string) bool {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI (.ci/run installs it)", tool)
			}
			t.Logf("%s is not installed: %s", tool, untested)
			return false
		}
	}
	return true
}

// needTools skips the test unless haveTools.
func needTools(t *testing.T, untested string, tools ...string) {
	t.Helper()
	if !haveTools(t, untested, tools...) {
		t.Skip("skipped: " + untested)
	}
}

// mcpEverything is the reference MCP server's binary
// (LONGHAUL_TEST_MCP_EVERYTHING): the test skips without it, or fails under
// CI=true, where .ci/run installs it.
func mcpEverything(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("LONGHAUL_TEST_MCP_EVERYTHING")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("LONGHAUL_TEST_MCP_EVERYTHING must be set under CI=true (.ci/run installs @modelcontextprotocol/server-everything)")
		}
		t.Skip("LONGHAUL_TEST_MCP_EVERYTHING is not set (the reference MCP server)")
	}
	return bin
}

// apiPort is the port of the server's own API.
func apiPort(t *testing.T, srv *server) int {
	t.Helper()
	_, p, err := net.SplitHostPort(srv.addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	return port
}

// runSession creates a session and waits, up to timeout, until its turn
// has ended. What failed a failed session is logged, for the report of the
// assertion that follows.
func runSession(ctx context.Context, t *testing.T, srv *server, req *lt.CreateSessionRequest, timeout time.Duration) *lt.Session {
	t.Helper()
	s, err := srv.api.CreateSession(ctx, req)
	require.NoError(t, err)
	s = waitTerminal(ctx, t, srv, s.ID, timeout)
	if s.Status == lt.SessionFailed {
		for _, ev := range eventsOf(ctx, t, srv.api, s.ID, lt.EventTurnFailed, lt.EventToolFailed) {
			t.Logf("session %s: %s %s", s.ID, ev.Type, ev.Data)
		}
	}
	return s
}

// requireStatus fails, with the stop reason and the journal, unless s is
// in status want.
func requireStatus(ctx context.Context, t *testing.T, srv *server, s *lt.Session, want lt.SessionStatus) {
	t.Helper()
	if s.Status != want {
		require.Equal(t, want, s.Status, "stop reason %s\n%s", deref(s.StopReason), describeJournal(journal(ctx, t, srv.api, s.ID)))
	}
}

// waitStatus waits, up to timeout, until the session is in one of want.
func waitStatus(ctx context.Context, t *testing.T, srv *server, id string, timeout time.Duration, want ...lt.SessionStatus) *lt.Session {
	t.Helper()
	var s *lt.Session
	waitFor(t, timeout, "session "+id+" to be "+string(want[0]), func() (bool, error) {
		var err error
		if s, err = srv.api.GetSession(ctx, id); err != nil {
			return false, err
		}
		for _, w := range want {
			if s.Status == w {
				return true, nil
			}
		}
		return false, nil
	})
	return s
}

// waitEvent waits, up to timeout, until the session's journal holds an
// event of typ, and returns the journal as it was then.
func waitEvent(ctx context.Context, t *testing.T, srv *server, id, typ string, timeout time.Duration) []lt.Event {
	t.Helper()
	var evs []lt.Event
	waitFor(t, timeout, "a "+typ+" event", func() (bool, error) {
		evs = journal(ctx, t, srv.api, id)
		for _, ev := range evs {
			if ev.Type == typ {
				return true, nil
			}
		}
		return false, nil
	})
	return evs
}

// eventsOf returns the session's events of the given types, in order.
func eventsOf(ctx context.Context, t *testing.T, api *client.Client, id string, types ...string) []lt.Event {
	t.Helper()
	var out []lt.Event
	for _, ev := range journal(ctx, t, api, id) {
		for _, typ := range types {
			if ev.Type == typ {
				out = append(out, ev)
				break
			}
		}
	}
	return out
}

// eventData decodes the data of the session's events of typ into T.
func eventData[T any](ctx context.Context, t *testing.T, api *client.Client, id, typ string) []T {
	t.Helper()
	var out []T
	for _, ev := range eventsOf(ctx, t, api, id, typ) {
		var d T
		require.NoError(t, json.Unmarshal(ev.Data, &d), "event %d %s", ev.Seq, typ)
		out = append(out, d)
	}
	return out
}

// dataOf returns the data of events, as strings.
func dataOf(evs []lt.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, string(ev.Data))
	}
	return out
}
