package node_test

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/node"
)

// serveLimited serves h on a loopback listener within limits and returns
// its address.
func serveLimited(t *testing.T, h http.Handler, limits node.HTTPLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := node.HTTPServer(h, limits, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(node.LimitConnsPerIP(ln, limits)) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return ln.Addr().String()
}

// echoBody answers with the request's body.
var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "body not read", http.StatusBadRequest)
		return
	}
	_, _ = w.Write(b)
})

// requireClosedWithin reads conn until the server closes it, failing if
// that takes longer than within; it returns how long it took.
func requireClosedWithin(t *testing.T, conn net.Conn, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(start.Add(within)))
	_, err := io.Copy(io.Discard, conn)
	if err != nil {
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server did not close the connection within %s", within)
		require.Contains(t, err.Error(), "connection reset")
	}
	return time.Since(start)
}

const shortLimit = 200 * time.Millisecond

func TestHTTPLimitsCloseSlowClients(t *testing.T) {
	t.Parallel()
	addr := serveLimited(t, echoBody, node.HTTPLimits{
		ReadHeaderTimeout: shortLimit, ReadTimeout: shortLimit, WriteTimeout: time.Minute, IdleTimeout: shortLimit,
	})
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}

	t.Run("a connection that never sends a header", func(t *testing.T) {
		t.Parallel()
		// Timed from before the dial: the server's deadline starts once it
		// reads the connection, never before this.
		start := time.Now()
		requireClosedWithin(t, dial(), 10*time.Second)
		require.GreaterOrEqual(t, time.Since(start), shortLimit, "closed by the header timeout, not at once")
	})
	t.Run("half a header", func(t *testing.T) {
		t.Parallel()
		conn := dial()
		_, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		requireClosedWithin(t, conn, 10*time.Second)
	})
	t.Run("one byte of a 100-byte body", func(t *testing.T) {
		t.Parallel()
		conn := dial()
		_, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nx")
		require.NoError(t, err)
		requireClosedWithin(t, conn, 10*time.Second)
	})
	t.Run("an idle keep-alive connection", func(t *testing.T) {
		t.Parallel()
		conn := dial()
		_, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
		require.NoError(t, err)
		rd := bufio.NewReader(conn)
		res, err := http.ReadResponse(rd, nil)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, "ok", string(body))
		require.NotEqual(t, "close", res.Header.Get("Connection"), "kept alive")
		// Then nothing: closed after the idle timeout.
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = rd.ReadByte()
		require.ErrorIs(t, err, io.EOF)
	})
}

func TestHTTPLimitsDefaultsAndOff(t *testing.T) {
	t.Parallel()
	srv := node.HTTPServer(http.NotFoundHandler(), node.HTTPLimits{}, nil)
	require.Equal(t, node.DefaultReadHeaderTimeout, srv.ReadHeaderTimeout)
	require.Equal(t, node.DefaultReadTimeout, srv.ReadTimeout)
	require.Equal(t, node.DefaultWriteTimeout, srv.WriteTimeout)
	require.Equal(t, node.DefaultIdleTimeout, srv.IdleTimeout)

	off := node.HTTPLimits{ReadHeaderTimeout: -1, ReadTimeout: -1, WriteTimeout: -1, IdleTimeout: -1, MaxConnsPerIP: -1}
	srv = node.HTTPServer(http.NotFoundHandler(), off, nil)
	require.Zero(t, srv.ReadHeaderTimeout+srv.ReadTimeout+srv.WriteTimeout+srv.IdleTimeout)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	require.Same(t, ln, node.LimitConnsPerIP(ln, off), "no cap: the listener itself")
}

func TestConnectionCapPerIP(t *testing.T) {
	t.Parallel()
	const max = 3
	addr := serveLimited(t, echoBody, node.HTTPLimits{MaxConnsPerIP: max, ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, IdleTimeout: time.Minute})
	dialFrom := func(local string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
		return d.Dial("tcp", addr)
	}
	// A flood from 127.0.0.1: the first max connections are held open
	// (idle, sending nothing), every further one is refused with a 429.
	var held []net.Conn
	for range max {
		c, err := dialFrom("127.0.0.1")
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		held = append(held, c)
	}
	// Accept runs apart from Dial: a refused connection proves the held
	// ones were counted. Poll, since the server may not have accepted the
	// held ones yet when the first extra one arrives (then it is served).
	refused := func() bool {
		c, err := dialFrom("127.0.0.1")
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
		if err != nil {
			return false
		}
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusTooManyRequests {
			require.Contains(t, string(body), `"rate_limited"`)
			require.Equal(t, "1", res.Header.Get("Retry-After"))
			return true
		}
		return false
	}
	require.Eventually(t, refused, 10*time.Second, 10*time.Millisecond)

	// Another address is still served meanwhile (127.0.0.2 reaches a
	// 127.0.0.1 listener on Linux, whose loopback is all of 127/8).
	other, err := dialFrom("127.0.0.2")
	if err != nil && strings.Contains(err.Error(), "assign requested address") {
		t.Log("no 127.0.0.2 on this system: the other-address check is skipped")
	} else {
		require.NoError(t, err)
		defer other.Close()
		_, err = io.WriteString(other, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nother")
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(other), nil)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "other", string(body))
	}

	// A held connection closed gives its slot back.
	require.NoError(t, held[0].Close())
	served := func() bool {
		c, err := dialFrom("127.0.0.1")
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nback")
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}
	require.Eventually(t, served, 10*time.Second, 10*time.Millisecond)
}
