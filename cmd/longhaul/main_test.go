package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// testTimeout bounds every wait of these tests; nothing sleeps.
const testTimeout = 30 * time.Second

// outBuffer is a concurrency-safe writer whose content can be waited for:
// serve and its logger write from several goroutines.
type outBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newOutBuffer() *outBuffer { return &outBuffer{changed: make(chan struct{})} }

func (b *outBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return n, err
}

func (b *outBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor blocks until the output contains sub, and returns the output.
func (b *outBuffer) waitFor(t *testing.T, sub string) string {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		b.mu.Lock()
		s, ch := b.buf.String(), b.changed
		b.mu.Unlock()
		if strings.Contains(s, sub) {
			return s
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("output never contained %q; it is:\n%s", sub, s)
		}
	}
}

// result is what one CLI invocation did.
type result struct {
	stdout, stderr string
	err            error
	code           int
}

// cliRun runs the command line in-process, as main would, and returns its
// output and exit code.
func cliRun(t *testing.T, args ...string) result {
	t.Helper()
	return cliRunWithin(t, testTimeout, args...)
}

// cliRunWithin is cliRun with its own bound on the whole command, for a
// command that does much more than one wait's worth of work (a bench of
// several scenarios, on a machine whose load nobody controls).
func cliRunWithin(t *testing.T, bound time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	stdout, stderr := newOutBuffer(), newOutBuffer()
	err := run(ctx, args, stdout, stderr)
	code := reportError(ctx, stderr, err)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err, code: code}
}

// cliOK runs the command line and requires success.
func cliOK(t *testing.T, args ...string) string {
	t.Helper()
	r := cliRun(t, args...)
	require.NoError(t, r.err, "longhaul %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	return r.stdout
}

// cliJSON runs the command line and decodes its JSON output into a T.
func cliJSON[T any](t *testing.T, args ...string) T {
	t.Helper()
	out := cliOK(t, args...)
	var v T
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "output of longhaul %s:\n%s", strings.Join(args, " "), out)
	return v
}

// testServer is a real server in this process: SQLite in a temporary
// directory, the engine with the scripted provider, the API on httptest.
type testServer struct {
	url    string
	client *client.Client
	dbPath string
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(ctx, filepath.Join(dir, dbFile), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: filepath.Join(dir, workspacesDir),
		NodeID:        "node-test",
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
		Logger:        log,
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	// The application service over the engine, with a vault, as a node
	// serves it.
	a := apptest.New(t, st, eng, nil)
	api := server.New(a, st, &server.Config{Logger: log, Keys: a, Audit: a}) // as internal/node wires it
	ts := httptest.NewServer(api)
	t.Cleanup(func() {
		api.Shutdown() // ends event streams, so Close does not wait for them
		ts.Close()
		stopCtx, cancel := context.WithTimeout(ctx, testTimeout)
		defer cancel()
		require.NoError(t, eng.Stop(stopCtx))
		require.NoError(t, st.Close())
	})
	cl, err := client.New(ts.URL, nil)
	require.NoError(t, err)
	return &testServer{url: ts.URL, client: cl, dbPath: st.Path()}
}

// waitEvent follows the session's journal until an event of type typ and
// returns it.
func (s *testServer) waitEvent(t *testing.T, sessionID, typ string) lt.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for ev, err := range s.client.StreamEvents(ctx, sessionID, 0) {
		require.NoError(t, err)
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("stream of %s ended without %s", sessionID, typ)
	return lt.Event{}
}

// writeFile writes a file in a new temporary directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestHelpForEveryCommand(t *testing.T) {
	t.Parallel()
	c := &cli{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	var walk func(cmd *cobra.Command, path []string)
	count := 0
	walk = func(cmd *cobra.Command, path []string) {
		count++
		name := strings.Join(path, " ")
		require.NotEmpty(t, cmd.Short, "%s: Short", name)
		require.NotContains(t, cmd.Short, "\n", "%s: Short must be one line", name)
		require.NotEmpty(t, cmd.Example, "%s: Example", name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := cliRun(t, append(path[1:], "--help")...)
			require.NoError(t, r.err)
			require.Equal(t, exitOK, r.code)
			require.Contains(t, r.stdout, "Usage:")
			require.Contains(t, r.stdout, "Examples:")
			require.Empty(t, r.stderr)
		})
		for _, sub := range cmd.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	root := c.rootCmd()
	root.InitDefaultHelpCmd()
	walk(root, []string{"longhaul"})
	require.GreaterOrEqual(t, count, 18, "every command is visited")

	// `help COMMAND` works too, and no arguments at all shows the help.
	require.Contains(t, cliOK(t, "help", "agents", "put"), "longhaul agents put FILE")
	require.Contains(t, cliOK(t), "Available Commands:")
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"frob"},
		{"agents", "frob"},
		{"show"},
		{"show", "a", "b"},
		{"ls", "--bogus"},
		{"ls", "--status", "sleeping"},
		{"ls", "--limit", "0"},
		{"events", "ses_1", "--after", "-1"},
		{"run", "do it"},
		{"run", "--agent", "a", "--agent-spec", "f.json", "do it"},
		{"run", "--agent", "a", "  "},
		{"run", "--agent", "a", "--budget-usd", "-1", "do it"},
		{"respond", "ses_1", "act_1"},
		{"respond", "ses_1", "act_1", "--output", "{}", "--error", "x"},
		{"respond", "ses_1", "act_1", "--output", "{not json"},
		{"decide", "ses_1", "act_1", "maybe"},
		{"decide", "ses_1", "act_1", "skip", "--output", "{}"},
		{"respond", "act_1"},
		{"respond", "act_1", "--output", "{not json"},
		{"decide", "act_1", "maybe"},
		{"decide", "act_1"},
		{"run", "--agent", "a", "--max-tokens", "0", "do it"},
		{"run", "--agent", "a", "--max-wall", "1.5s", "do it"},
		{"run", "--agent", "a", "--budget-usd", "1", "--max-cost", "2", "do it"},
		{"send", "ses_1"},
		{"completion"},
		{"completion", "tcsh"},
		{"agents", "show"},
		{"version", "extra"},
		{"actions", "ses_1", "--status", "open"},
		{"serve", "--addr", "nonsense"},
		{"serve", "--log-level", "loud"},
		{"serve", "--allowed-host", "https://longhaul.example"},
		{"serve", "--public-url", "longhaul.example"},
		{"serve", "--public-url", "https://longhaul.example/ui"},
		{"serve", "--read-timeout", "-1s"},
		{"serve", "--max-conns-per-ip", "-1"},
		{"demo", "--pace", "-1s"},
		{"demo", "--server", "http://127.0.0.1:1", "--data", "x"},
		{"help", "frob"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := cliRun(t, args...)
			require.Error(t, r.err)
			require.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stderr, "Error: ")
		})
	}
}

func TestAPIErrorShowsCodeMessageAndField(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)

	r := cliRun(t, "show", "ses_missing", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    not_found (HTTP 404)")
	// What failed and the server's message, once each: the code has its
	// own line.
	require.Equal(t, "Error: get session ses_missing: session ses_missing not found\n  code:    not_found (HTTP 404)\n", r.stderr)

	spec := writeFile(t, "spec.json", `{"model": {"provider": "nope"}}`)
	r = cliRun(t, "run", "--server", s.url, "--agent-spec", spec, "hello")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    invalid_request (HTTP 400)")
	require.Contains(t, r.stderr, "field:   agent_spec.model.provider")
	require.Equal(t, 1, strings.Count(r.stderr, "invalid_request"), r.stderr)
}

func TestEnvironmentSuppliesServer(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	env := map[string]string{"LONGHAUL_SERVER": s.url}
	out := newOutBuffer()
	err := execute(context.Background(), []string{"ls", "--json"}, out, io.Discard, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.JSONEq(t, `[]`, out.String())

	// A flag wins over the environment.
	err = execute(context.Background(), []string{"ls", "--server", "ftp://nowhere"}, io.Discard, io.Discard, func(k string) string { return env[k] })
	var ue *usageError
	require.ErrorAs(t, err, &ue)
}
