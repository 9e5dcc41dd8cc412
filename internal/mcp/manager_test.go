package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/mcp"
	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
)

// memDialer connects to a fresh in-process test server on every Dial, over
// in-memory transports; its crashes close the server's side of the
// connection in the middle of the call.
type memDialer struct {
	dir string

	mu    sync.Mutex
	dials int
	fail  error // Dial fails with it when set
}

func (d *memDialer) Dial(ctx context.Context) (*mcp.Link, error) {
	d.mu.Lock()
	d.dials++
	fail := d.fail
	d.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	// A crash closes the server's end of the pipe: its process is gone,
	// as far as the client can tell.
	clientEnd, serverEnd := net.Pipe()
	srv := mcptest.NewServer(mcptest.Options{Dir: d.dir, Crash: func() { serverEnd.Close() }})
	ss, err := srv.Connect(ctx, &sdk.IOTransport{Reader: serverEnd, Writer: serverEnd}, nil)
	if err != nil {
		return nil, err
	}
	return &mcp.Link{
		Transport: &sdk.IOTransport{Reader: clientEnd, Writer: clientEnd},
		Close: func() {
			serverEnd.Close()
			_ = ss.Wait()
		},
		Diagnose: func() string { return "the in-memory server closed" },
	}, nil
}

func (d *memDialer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials
}

// instantAfter makes backoffs immediate and counts them.
type instantAfter struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (a *instantAfter) After(d time.Duration) <-chan time.Time {
	a.mu.Lock()
	a.waits = append(a.waits, d)
	a.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func newManager(t *testing.T, d mcp.Dialer, after *instantAfter) *mcp.Manager {
	t.Helper()
	m, err := mcp.NewManager([]mcp.Server{{Name: "test", Dialer: d}}, &mcp.Config{After: after.After, InitialBackoff: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m
}

func callLog(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, mcptest.CallLog))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func TestKeyMetaMatches(t *testing.T) {
	require.Equal(t, mcp.IdempotencyKeyMeta, mcptest.KeyMeta)
}

func TestListAndCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := &memDialer{dir: dir}
	m := newManager(t, d, &instantAfter{})
	ctx := t.Context()
	require.Equal(t, 0, m.Generation("test"), "nothing is started before it is needed")

	l, err := m.List(ctx, "test")
	require.NoError(t, err)
	var names []string
	for _, tl := range l.Tools {
		names = append(names, tl.Name)
	}
	require.ElementsMatch(t, []string{"echo", "add", "fail", "refuse", "record", "crash_once", "exit_always", "hang"}, names)
	require.Equal(t, "mcptest", l.ServerName)
	require.Equal(t, "1.0.0", l.ServerVersion)
	require.Equal(t, 1, l.Generation)

	res := m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	require.Empty(t, res.Error)
	out, err := json.Marshal(res.Output)
	require.NoError(t, err)
	require.JSONEq(t, `{"content":[{"type":"text","text":"echo: hi"}]}`, string(out))

	res = m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "add", Arguments: json.RawMessage(`{"a":2,"b":3}`)})
	out, err = json.Marshal(res.Output)
	require.NoError(t, err)
	require.JSONEq(t, `{"content":[{"type":"text","text":"5"}],"structured_content":{"sum":5}}`, string(out))

	res = m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "record", Arguments: json.RawMessage(`{"note":"n1"}`), IdempotencyKey: "key-1"})
	require.Empty(t, res.Error)
	require.Equal(t, []string{"record key-1 n1"}, callLog(t, dir), "the idempotency key reaches the server in _meta")
	require.Equal(t, 1, d.count(), "one connection served every call")

	_, err = m.List(ctx, "nope")
	require.ErrorContains(t, err, `unknown server "nope"`)
}

// TestCallErrors: a tool's own error and a protocol error are failures the
// model reads; neither is transient nor of unknown outcome, and the
// connection stays up.
func TestCallErrors(t *testing.T) {
	t.Parallel()
	d := &memDialer{dir: t.TempDir()}
	m := newManager(t, d, &instantAfter{})
	ctx := t.Context()

	res := m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "fail"})
	require.Equal(t, &mcp.CallResult{Error: "it failed as asked"}, res)

	res = m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "refuse"})
	require.Contains(t, res.Error, "MCP server test refused the call: error -32000: refused by the test server")
	require.False(t, res.Transient)
	require.False(t, res.Unknown)

	res = m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "no_such_tool"})
	require.Contains(t, res.Error, "refused the call", "an unknown tool is the server's protocol error")
	require.False(t, res.Unknown)
	require.Equal(t, 1, d.count())
	require.Equal(t, 1, m.Generation("test"))
}

// TestCrashMidCall: a server that dies during a call leaves its outcome
// unknown; the next call starts it again (a new generation), and a repeat
// with the same key is answered.
func TestCrashMidCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := &memDialer{dir: dir}
	after := &instantAfter{}
	m := newManager(t, d, after)
	ctx := t.Context()

	req := &mcp.CallRequest{Server: "test", Tool: "crash_once", Arguments: json.RawMessage(`{"note":"x"}`), IdempotencyKey: "key-7"}
	res := m.Call(ctx, req)
	require.True(t, res.Unknown, "%+v", res)
	require.True(t, res.Transient)
	require.Contains(t, res.Error, "broke during the call")
	require.Contains(t, res.Lost, "the in-memory server closed")

	res = m.Call(ctx, req)
	require.Empty(t, res.Error)
	require.Equal(t, 2, m.Generation("test"), "restarted once")
	require.Equal(t, []string{"crash_once key-7 crashed", "crash_once key-7 answered"}, callLog(t, dir))
	require.Equal(t, []time.Duration{100 * time.Millisecond}, after.waits, "one backoff before the restart")
}

// TestRestartsAreBounded: a server that dies on every call is restarted
// with growing backoffs, and after MaxFailures in a row it is unavailable:
// nothing more is sent to it.
func TestRestartsAreBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := &memDialer{dir: dir}
	after := &instantAfter{}
	m := newManager(t, d, after)
	ctx := t.Context()
	for i := range 3 {
		res := m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "exit_always"})
		require.True(t, res.Unknown, "call %d", i)
	}
	res := m.Call(ctx, &mcp.CallRequest{Server: "test", Tool: "exit_always"})
	require.False(t, res.Unknown, "nothing was sent")
	require.True(t, res.Transient)
	require.Contains(t, res.Error, "MCP server test is unavailable (3 failed starts in a row)")
	require.Len(t, callLog(t, dir), 3)
	require.Equal(t, 3, d.count())
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, after.waits)

	// A server that cannot be started at all.
	d2 := &memDialer{dir: t.TempDir(), fail: errors.New("no such program")}
	m2 := newManager(t, d2, &instantAfter{})
	_, err := m2.List(ctx, "test")
	var ue *mcp.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "test", ue.Server)
	require.ErrorContains(t, err, "no such program")
	require.Equal(t, 3, d2.count())
}

// TestCallTimeout: a call that does not answer in time has an unknown
// outcome (the server may still do it).
func TestCallTimeout(t *testing.T) {
	t.Parallel()
	m := newManager(t, &memDialer{dir: t.TempDir()}, &instantAfter{})
	res := m.Call(t.Context(), &mcp.CallRequest{Server: "test", Tool: "hang", Timeout: 50 * time.Millisecond})
	require.True(t, res.Unknown)
	require.True(t, res.Transient)
	require.Contains(t, res.Error, "timed out after 50ms")
	// The connection is still good.
	res = m.Call(t.Context(), &mcp.CallRequest{Server: "test", Tool: "echo", Arguments: json.RawMessage(`{"text":"still here"}`)})
	require.Empty(t, res.Error)
	require.Equal(t, 1, m.Generation("test"))
}

func TestManagerConfigAndClose(t *testing.T) {
	t.Parallel()
	d := &memDialer{dir: t.TempDir()}
	_, err := mcp.NewManager([]mcp.Server{{Name: "a", Dialer: d}, {Name: "a", Dialer: d}}, nil)
	require.ErrorContains(t, err, `servers[1].name: duplicate server "a"`)
	_, err = mcp.NewManager([]mcp.Server{{Name: "a"}}, nil)
	require.ErrorContains(t, err, "servers[0].dialer: is required")
	_, err = mcp.NewManager(nil, &mcp.Config{MaxFailures: -1})
	require.ErrorContains(t, err, "MaxFailures")

	m, err := mcp.NewManager([]mcp.Server{{Name: "test", Dialer: d}}, nil)
	require.NoError(t, err)
	_, err = m.List(t.Context(), "test")
	require.NoError(t, err)
	m.Close()
	m.Close()
	res := m.Call(t.Context(), &mcp.CallRequest{Server: "test", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	require.Contains(t, res.Error, "manager is closed")
}
