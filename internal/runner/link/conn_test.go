package link_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// dial connects a WebSocket pair over a real loopback HTTP server: accepted
// is the server's end (handed to onAccept, which owns it), the returned one
// the client's.
func dial(t *testing.T, onAccept func(ws *websocket.Conn)) *websocket.Conn {
	t.Helper()
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		onAccept(ws)
	}))
	t.Cleanup(func() { srv.Close(); wg.Wait() })
	ws, _, err := websocket.Dial(t.Context(), srv.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// accepted returns a Conn with cfg at the server's end of a connection
// and the raw client end, for a test to play a misbehaving peer with.
func accepted(t *testing.T, cfg *link.Config) (*link.Conn, *websocket.Conn) {
	t.Helper()
	got := make(chan *link.Conn, 1)
	ws := dial(t, func(ws *websocket.Conn) {
		c := link.New(ws, cfg)
		got <- c
		<-c.Done()
	})
	return <-got, ws
}

// pair returns two Conns talking to each other: server (with srvCfg) and
// client (with cliCfg).
func pair(t *testing.T, srvCfg, cliCfg *link.Config) (server, client *link.Conn) {
	t.Helper()
	server, ws := accepted(t, srvCfg)
	client = link.New(ws, cliCfg)
	t.Cleanup(func() {
		client.Close("test over")
		server.Close("test over")
		<-client.Done()
		<-server.Done()
	})
	return server, client
}

// TestCallsMatchedByID: concurrent calls, answered out of order, each get
// their own result.
func TestCallsMatchedByID(t *testing.T) {
	t.Parallel()
	release, releaseAll := gate()
	server, runner := pair(t, nil, &link.Config{Handlers: map[string]link.Handler{
		"echo": func(ctx context.Context, req *link.Request) (any, error) {
			var n int
			if err := req.DecodeParams(&n); err != nil {
				return nil, err
			}
			if n%2 == 0 {
				<-release // the even ones answer after the odd ones
			}
			return n * 10, nil
		},
	}})
	var wg sync.WaitGroup
	results := make([]int, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() { errs[i] = server.Call(t.Context(), "echo", i, &results[i], nil) })
	}
	t.Cleanup(releaseAll) // before the connections' cleanup: a failed check must not leave handlers blocked
	require.Eventually(t, func() bool { _, in := runner.InFlight(); return in == 10 }, 10*time.Second, time.Millisecond)
	releaseAll()
	wg.Wait()
	for i := range 20 {
		require.NoError(t, errs[i])
		require.Equal(t, i*10, results[i])
	}
	requireIdle(t, server, runner)
}

// gate is a channel closed by its func, which may be called more than
// once (by the test, and by its cleanup when a check failed first).
func gate() (<-chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}

// requireIdle waits until neither side has a call open.
func requireIdle(t *testing.T, conns ...*link.Conn) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range conns {
			if out, in := c.InFlight(); out+in != 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond)
}

// TestOutputStreamsInOrder: a handler's output larger than a frame arrives
// whole and in order, split into chunks under the limit.
func TestOutputStreamsInOrder(t *testing.T) {
	t.Parallel()
	const limit = 16 << 10
	want := bytes.Repeat([]byte("0123456789abcdef"), 20_000) // 320 KB: many frames
	server, _ := pair(t, &link.Config{MaxMessageBytes: limit}, &link.Config{MaxMessageBytes: limit, Handlers: map[string]link.Handler{
		"cat": func(ctx context.Context, req *link.Request) (any, error) {
			if err := req.Output(ctx, link.StreamStdout, want); err != nil {
				return nil, err
			}
			return "done", req.Output(ctx, link.StreamStderr, []byte("bye"))
		},
	}})
	var stdout, stderr bytes.Buffer
	frames := 0
	var res string
	err := server.Call(t.Context(), "cat", nil, &res, &link.CallOptions{OnOutput: func(stream string, data []byte) {
		frames++
		if stream == link.StreamStdout {
			stdout.Write(data)
		} else {
			stderr.Write(data)
		}
	}})
	require.NoError(t, err)
	require.Equal(t, "done", res)
	require.Equal(t, want, stdout.Bytes())
	require.Equal(t, "bye", stderr.String())
	require.Greater(t, frames, len(want)/limit, "split into frames under the limit")
}

// TestCancelReachesTheHandler: a cancelled call returns at once, the
// callee's handler sees its context cancelled, and both sides forget the
// call once its late answer came.
func TestCancelReachesTheHandler(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	handlerErr := make(chan error, 1)
	server, runner := pair(t, nil, &link.Config{Handlers: map[string]link.Handler{
		"sleep": func(ctx context.Context, req *link.Request) (any, error) {
			close(started)
			<-ctx.Done()
			handlerErr <- context.Cause(ctx)
			return nil, ctx.Err()
		},
	}})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- server.Call(ctx, "sleep", nil, nil, nil) }()
	<-started
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.ErrorContains(t, <-handlerErr, "the caller cancelled")
	requireIdle(t, server, runner)

	// The connection still works.
	require.Error(t, server.Call(t.Context(), "nope", nil, nil, nil))
}

// TestUnknownMethodAndBusy: a call of no handler, and one past
// MaxIncoming, are answered with errors, not violations.
func TestUnknownMethodAndBusy(t *testing.T) {
	t.Parallel()
	block, unblock := gate()
	server, runner := pair(t, nil, &link.Config{MaxIncoming: 1, Handlers: map[string]link.Handler{
		"block": func(ctx context.Context, req *link.Request) (any, error) { <-block; return nil, nil },
	}})
	t.Cleanup(unblock)
	var re *link.RemoteError
	require.ErrorAs(t, server.Call(t.Context(), "nope", nil, nil, nil), &re)
	require.Equal(t, link.CodeUnknownMethod, re.Code)

	done := make(chan error, 1)
	go func() { done <- server.Call(t.Context(), "block", nil, nil, nil) }()
	require.Eventually(t, func() bool { _, in := runner.InFlight(); return in == 1 }, 10*time.Second, time.Millisecond)
	require.ErrorAs(t, server.Call(t.Context(), "block", nil, nil, nil), &re)
	require.Equal(t, link.CodeBusy, re.Code)
	unblock()
	require.NoError(t, <-done)
	require.NoError(t, runner.Err())
}

// TestHandlerPanicIsTheCallsError: a panicking handler fails its call;
// the connection lives on.
func TestHandlerPanicIsTheCallsError(t *testing.T) {
	t.Parallel()
	server, runner := pair(t, nil, &link.Config{Handlers: map[string]link.Handler{
		"boom": func(ctx context.Context, req *link.Request) (any, error) { panic("boom") },
	}})
	var re *link.RemoteError
	require.ErrorAs(t, server.Call(t.Context(), "boom", nil, nil, nil), &re)
	require.Equal(t, link.CodeFailed, re.Code)
	require.NoError(t, runner.Err())
}

// TestHeartbeatNoticesADeadPeer: a peer that stops reading (so never
// answers a ping) is dropped within interval + timeout.
func TestHeartbeatNoticesADeadPeer(t *testing.T) {
	t.Parallel()
	// The client's end never reads: its pongs are never sent.
	c, _ := accepted(t, &link.Config{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond})
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a peer that never answers a ping was not dropped")
	}
	require.ErrorContains(t, c.Err(), "heartbeat: no pong within 100ms")
}

// TestPendingCallEndsWithTheConnection: a call waiting when the
// connection ends returns ErrClosed.
func TestPendingCallEndsWithTheConnection(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	server, runner := pair(t, nil, &link.Config{Handlers: map[string]link.Handler{
		"hang": func(ctx context.Context, req *link.Request) (any, error) {
			close(started)
			<-ctx.Done()
			return nil, nil
		},
	}})
	errc := make(chan error, 1)
	go func() { errc <- server.Call(t.Context(), "hang", nil, nil, nil) }()
	<-started
	runner.Close("runner going away")
	require.ErrorIs(t, <-errc, link.ErrClosed)
	<-runner.Done() // the handler's context was cancelled, so Done closes
	require.ErrorIs(t, server.Call(t.Context(), "hang", nil, nil, nil), link.ErrClosed)
}

// TestOversizeMessage: a frame over the limit closes the connection
// (naming the limit), and this side refuses to send one.
func TestOversizeMessage(t *testing.T) {
	t.Parallel()
	c, ws := accepted(t, &link.Config{MaxMessageBytes: 8 << 10})

	err := c.Call(t.Context(), "x", strings.Repeat("a", 9<<10), nil, nil)
	require.ErrorContains(t, err, "over the limit of 8192")
	require.NoError(t, c.Err(), "refusing to send is no reason to close")

	big := fmt.Sprintf(`{"type":"call","id":1,"method":"x","params":"%s"}`, strings.Repeat("a", 9<<10))
	_ = ws.Write(t.Context(), websocket.MessageText, []byte(big))
	<-c.Done()
	require.ErrorContains(t, c.Err(), "over the limit of 8192")
	_, _, err = ws.Read(t.Context())
	require.Equal(t, websocket.StatusMessageTooBig, websocket.CloseStatus(err))
}

// TestViolationsCloseTheConnection: a peer that breaks the protocol
// loses the connection, with a policy-violation close naming why.
func TestViolationsCloseTheConnection(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		frames []string
		want   string
	}{
		"result never asked for":  {[]string{`{"type":"result","id":7,"result":1}`}, "result for call 7, which is not waiting"},
		"output never asked for":  {[]string{`{"type":"output","id":1,"stream":"stdout","data":"eA=="}`}, "output for call 1"},
		"error never asked for":   {[]string{`{"type":"error","id":3,"error":{"code":"failed","message":"x"}}`}, "error for call 3"},
		"a call id used twice":    {[]string{`{"type":"call","id":2,"method":"x"}`, `{"type":"call","id":2,"method":"x"}`}, "call id 2 is not above 2"},
		"a call id going back":    {[]string{`{"type":"call","id":5,"method":"x"}`, `{"type":"call","id":4,"method":"x"}`}, "call id 4 is not above 5"},
		"cancel of no call":       {[]string{`{"type":"cancel","id":9}`}, "cancel of call 9, which was never made"},
		"an unknown type":         {[]string{`{"type":"hello","id":1}`}, `unknown message type "hello"`},
		"an unknown field":        {[]string{`{"type":"call","id":1,"method":"x","session":"ses_1"}`}, `unknown field "session"`},
		"a field of another type": {[]string{`{"type":"call","id":1,"method":"x","result":1}`}, "result: not allowed in a call message"},
		"id zero":                 {[]string{`{"type":"call","id":0,"method":"x"}`}, "id: must be positive"},
		"a bad stream":            {[]string{`{"type":"output","id":1,"stream":"stdin","data":""}`}, `stream: "stdin" is neither`},
		"a long method":           {[]string{`{"type":"call","id":1,"method":"` + strings.Repeat("m", 65) + `"}`}, "method: must be 1 to 64 bytes"},
		"not JSON":                {[]string{`{"type":`}, "a frame that is no message"},
		"trailing data":           {[]string{`{"type":"cancel","id":1} {}`}, "trailing data"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A side that takes calls (of another method), so that a
			// call's id is what breaks the protocol.
			c, ws := accepted(t, &link.Config{Handlers: map[string]link.Handler{
				"y": func(context.Context, *link.Request) (any, error) { return nil, nil },
			}})
			for _, f := range tc.frames {
				_ = ws.Write(t.Context(), websocket.MessageText, []byte(f))
			}
			<-c.Done()
			require.ErrorContains(t, c.Err(), "protocol violation")
			require.ErrorContains(t, c.Err(), tc.want)
			// The peer is told why, as a policy violation (its read
			// drains any answer first).
			for {
				_, _, err := ws.Read(t.Context())
				if err != nil {
					require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "%v", err)
					break
				}
			}
		})
	}
}

// TestCallFloodIsBounded: a peer that floods a side with calls while never
// reading its answers makes it start a bounded number of goroutines, then
// loses the connection; a side that takes no calls at all closes the
// connection at the first one.
func TestCallFloodIsBounded(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	for name, tc := range map[string]struct {
		cfg  *link.Config
		want string
	}{
		"no handlers":     {nil, `to a side that takes no calls`},
		"unknown methods": {&link.Config{Handlers: map[string]link.Handler{"y": func(context.Context, *link.Request) (any, error) { return nil, nil }}}, "refused calls waiting"},
	} {
		t.Run(name, func(t *testing.T) {
			c, ws := accepted(t, tc.cfg)
			before := runtime.NumGoroutine()
			// Never read: the answers pile up in the socket's buffers
			// until this side's writes block, and then its refusals wait.
			// The flood stops once the connection is closed.
			for id := 1; id <= 2_000_000 && c.Err() == nil; id++ {
				f := fmt.Sprintf(`{"type":"call","id":%d,"method":"%s"}`, id, strings.Repeat("x", 64))
				if ws.Write(t.Context(), websocket.MessageText, []byte(f)) != nil {
					break
				}
				if id%64 == 0 {
					require.LessOrEqual(t, runtime.NumGoroutine()-before, link.MaxRefusalsInFlight+8,
						"goroutines stay bounded (call %d)", id)
				}
			}
			select {
			case <-c.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the flood did not close the connection")
			}
			require.ErrorContains(t, c.Err(), "protocol violation")
			require.ErrorContains(t, c.Err(), tc.want)
		})
	}
}

// TestMessageJSON: the frame shape other implementations read.
func TestMessageJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(link.Message{Type: link.TypeOutput, ID: 3, Stream: link.StreamStdout, Data: []byte("hi")})
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"output","id":3,"stream":"stdout","data":"aGk="}`, string(b))
	require.True(t, errors.Is(fmt.Errorf("x: %w", link.ErrClosed), link.ErrClosed))
}

// TestConcurrentCallsKeepTheirOrder: calls made at once from many
// goroutines go out in the order of their ids (the peer refuses an id not
// above the last one and closes the connection).
func TestConcurrentCallsKeepTheirOrder(t *testing.T) {
	t.Parallel()
	server, runner := pair(t, nil, &link.Config{Handlers: map[string]link.Handler{
		"echo": func(ctx context.Context, req *link.Request) (any, error) { return req.Params, nil },
	}})
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for range 20 {
		wg.Go(func() {
			for n := range 20 {
				var got int
				if err := server.Call(t.Context(), "echo", n, &got, nil); err != nil || got != n {
					errs <- fmt.Errorf("call %d: %v (got %d)", n, err, got)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, runner.Err())
	require.NoError(t, server.Err())
}

// TestAwaitCancelled: with AwaitCancelled, a cancelled Call returns only
// once the callee's handler is over.
func TestAwaitCancelled(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var ended atomic.Bool
	server, _ := pair(t, nil, &link.Config{Handlers: map[string]link.Handler{
		"slow": func(ctx context.Context, req *link.Request) (any, error) {
			close(started)
			<-ctx.Done()
			runtime.Gosched()
			ended.Store(true)
			return nil, ctx.Err()
		},
	}})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- server.Call(ctx, "slow", nil, nil, &link.CallOptions{AwaitCancelled: true}) }()
	<-started
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.True(t, ended.Load(), "the handler was over when Call returned")
}

// TestAwaitCancelledIsBounded: a peer that answers pings but never the
// call its caller cancelled (a runner built to lie) cannot hold the
// caller: after HeartbeatTimeout and CancelGrace the connection is closed
// as a policy violation (which ends the peer's programs), and the Call
// returns the context's error.
func TestAwaitCancelledIsBounded(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	never := make(chan struct{})
	// Heartbeats in seconds: at 20 ms / 200 ms a pong late on a loaded
	// machine closed the connection first, with another status.
	server, runner := pair(t, &link.Config{HeartbeatInterval: time.Second, HeartbeatTimeout: 2 * time.Second, CancelGrace: 100 * time.Millisecond},
		&link.Config{Handlers: map[string]link.Handler{
			"exec": func(context.Context, *link.Request) (any, error) {
				close(started)
				<-never // ignores its cancellation
				return nil, nil
			},
		}})
	t.Cleanup(func() { close(never) })
	ctx, cancel := context.WithCancel(t.Context())
	returned := make(chan error, 1)
	go func() {
		returned <- server.Call(ctx, "exec", struct{}{}, nil, &link.CallOptions{AwaitCancelled: true})
	}()
	<-started
	cancel()
	select {
	case err := <-returned:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("the cancelled call still waits for a peer that never answers it")
	}
	require.Error(t, server.Err())
	require.Eventually(t, func() bool { return runner.Err() != nil }, 10*time.Second, time.Millisecond)
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(runner.Err()), "%v", runner.Err())
}
