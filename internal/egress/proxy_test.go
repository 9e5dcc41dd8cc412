package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
)

// events collects what the proxy reports.
type events struct {
	mu  sync.Mutex
	all []egress.Event
}

func (e *events) add(ev egress.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) list() []egress.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]egress.Event(nil), e.all...)
}

type proxyHarness struct {
	sock   string
	events *events
	stop   func() error
}

// startProxy serves a proxy whose resolver maps the test's names to
// 127.0.0.1. The allowlist lists 127.0.0.1 literally: that is the explicit
// opt-in that lets a listed name reach loopback, where the test servers
// listen.
func startProxy(t *testing.T, allow []string, cfg egress.Config) *proxyHarness {
	t.Helper()
	if cfg.Resolver == nil {
		cfg.Resolver = &fakeResolver{answers: map[string][]string{
			"example.com":      {"127.0.0.1"},
			"echo.example.com": {"127.0.0.1"},
			"idle.example.com": {"127.0.0.1"},
			"evil.example.net": {"127.0.0.1"},
		}}
	}
	p, err := egress.NewPolicy(allow)
	require.NoError(t, err)
	h := &proxyHarness{sock: filepath.Join(t.TempDir(), "egress.sock"), events: &events{}}
	h.stop, err = egress.ListenUnix(t.Context(), h.sock, p, cfg, h.events.add)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.stop()) })
	return h
}

func (h *proxyHarness) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", h.sock)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return c
}

// roundTrip writes a raw request to the proxy and reads the response.
func (h *proxyHarness) roundTrip(t *testing.T, raw string) (*http.Response, string, net.Conn) {
	t.Helper()
	c := h.dial(t)
	_, err := io.WriteString(c, raw)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	require.NoError(t, err)
	var body []byte
	if resp.StatusCode != http.StatusOK || method != http.MethodConnect {
		body, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
	}
	return resp, string(body), &bufferedConn{Conn: c, r: br}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func listenerPort(t *testing.T, ln net.Listener) int {
	t.Helper()
	_, p, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	return port
}

func TestProxyConnectTLS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s over %s", r.Host, r.Proto)
	}))
	t.Cleanup(srv.Close)
	port := listenerPort(t, srv.Listener)
	h := startProxy(t, []string{"example.com", "127.0.0.1"}, egress.Config{Ports: []int{port}})

	info, err := os.Stat(h.sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	client := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress-proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", h.sock)
		},
		// The server name stays example.com: verification is end to end.
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(fmt.Sprintf("https://example.com:%d/", port))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, fmt.Sprintf("hello example.com:%d over HTTP/1.1", port), string(body))
	require.Equal(t, []egress.Event{{Via: "proxy", Host: "example.com", Port: port, Address: "127.0.0.1", Allowed: true}}, h.events.list())
}

func TestProxyConnectRefused(t *testing.T) {
	t.Parallel()
	h := startProxy(t, []string{"example.com"}, egress.Config{})
	tests := []struct {
		target, reason string
	}{
		{"evil.example.net:443", "host is not in the allowlist"},
		{"169.254.169.254:80", "IP address is not in the allowlist"},
		{"127.0.0.1:443", "IP address is not in the allowlist"},
		{"[::1]:443", "IP address is not in the allowlist"},
		// Listed, but resolves to loopback, which is not listed.
		{"example.com:443", "resolves to 127.0.0.1 (loopback)"},
		{"example.com:22", "port 22 is not allowed"},
	}
	for _, tc := range tests {
		resp, body, _ := h.roundTrip(t, "CONNECT "+tc.target+" HTTP/1.1\r\nHost: "+tc.target+"\r\n\r\n")
		require.Equal(t, http.StatusForbidden, resp.StatusCode, tc.target)
		require.Contains(t, body, tc.reason, tc.target)
	}
	evs := h.events.list()
	require.Len(t, evs, len(tests))
	for i, ev := range evs {
		require.Equal(t, "proxy", ev.Via)
		require.False(t, ev.Allowed)
		require.Contains(t, ev.Reason, tests[i].reason)
	}
	require.Equal(t, "::1", evs[3].Host)
}

func TestProxyConnectBadTarget(t *testing.T) {
	t.Parallel()
	h := startProxy(t, []string{"example.com"}, egress.Config{})
	resp, body, _ := h.roundTrip(t, "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "is not host:port")
	evs := h.events.list()
	require.Len(t, evs, 1)
	require.False(t, evs[0].Allowed)
}

// An echo server behind a tunnel: bytes go both ways, and closing the
// client's write side reaches the server, which then finishes.
func TestProxyConnectTunnelHalfClose(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	port := listenerPort(t, ln)
	h := startProxy(t, []string{"echo.example.com", "127.0.0.1"}, egress.Config{Ports: []int{port}})
	target := net.JoinHostPort("echo.example.com", strconv.Itoa(port))
	// The first bytes travel right behind the CONNECT, as TLS clients send
	// them.
	resp, _, c := h.roundTrip(t, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\nping ")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.WriteString(c, "pong")
	require.NoError(t, err)
	require.NoError(t, c.(*bufferedConn).Conn.(*net.UnixConn).CloseWrite())
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, "ping pong", string(got))
}

func TestProxyConnectIdleTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			held <- c // accepted and never answered
		}
	}()
	t.Cleanup(func() {
		select {
		case c := <-held:
			c.Close()
		default:
		}
	})
	port := listenerPort(t, ln)
	h := startProxy(t, []string{"idle.example.com", "127.0.0.1"}, egress.Config{Ports: []int{port}, IdleTimeout: 100 * time.Millisecond})
	target := net.JoinHostPort("idle.example.com", strconv.Itoa(port))
	resp, _, c := h.roundTrip(t, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The proxy closes the silent tunnel; the read ends well before the
	// connection's 10 s deadline.
	_, err = io.ReadAll(c)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "tunnel was not closed: %v", err)
}

func TestProxyPlainHTTP(t *testing.T) {
	t.Parallel()
	type seen struct {
		uri    string
		host   string
		header http.Header
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{uri: r.RequestURI, host: r.Host, header: r.Header.Clone()}
		w.Header().Set("X-Upstream", "yes")
		io.WriteString(w, "plain hello")
	}))
	t.Cleanup(srv.Close)
	port := listenerPort(t, srv.Listener)
	h := startProxy(t, []string{"example.com", "127.0.0.1"}, egress.Config{Ports: []int{port}})

	target := net.JoinHostPort("example.com", strconv.Itoa(port))
	resp, body, _ := h.roundTrip(t, "GET http://"+target+"/path?q=1 HTTP/1.1\r\n"+
		"Host: "+target+"\r\n"+
		"Proxy-Authorization: Basic c2FuZGJveDpzZWNyZXQ=\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"Connection: close, X-Hop\r\n"+
		"X-Hop: drop me\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"X-Keep: keep me\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "plain hello", body)
	require.Equal(t, "yes", resp.Header.Get("X-Upstream"))

	s := <-got
	require.Equal(t, "/path?q=1", s.uri)
	require.Equal(t, target, s.host)
	require.Equal(t, "keep me", s.header.Get("X-Keep"))
	for _, hop := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop", "Keep-Alive", "X-Forwarded-For"} {
		require.Empty(t, s.header.Values(hop), hop)
	}
	require.Equal(t, []egress.Event{{Via: "proxy", Host: "example.com", Port: port, Address: "127.0.0.1", Allowed: true}}, h.events.list())
}

func TestProxyPlainHTTPRefused(t *testing.T) {
	t.Parallel()
	h := startProxy(t, []string{"example.com"}, egress.Config{})
	resp, body, _ := h.roundTrip(t, "GET http://evil.example.net/x HTTP/1.1\r\nHost: evil.example.net\r\n\r\n")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "evil.example.net:80 refused: host is not in the allowlist")
	require.Equal(t, []egress.Event{{Via: "proxy", Host: "evil.example.net", Port: 80, Reason: "host is not in the allowlist"}}, h.events.list())

	resp, body, _ = h.roundTrip(t, "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "IP address is not in the allowlist")
}

func TestProxyRejectsMalformedRequests(t *testing.T) {
	t.Parallel()
	h := startProxy(t, []string{"example.com"}, egress.Config{MaxHeaderBytes: 4 << 10})

	resp, body, _ := h.roundTrip(t, "GET /path HTTP/1.1\r\nHost: example.com\r\n\r\n")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "absolute URL")

	resp, body, _ = h.roundTrip(t, "GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "use CONNECT for https")

	resp, _, _ = h.roundTrip(t, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Big: "+strings.Repeat("a", 16<<10)+"\r\n\r\n")
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	require.Empty(t, h.events.list(), "no destination was judged")
}

func TestProxyStopClosesTunnelsAndSocket(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(io.Discard, c)
	}()
	port := listenerPort(t, ln)
	p, err := egress.NewPolicy([]string{"echo.example.com", "127.0.0.1"})
	require.NoError(t, err)
	sock := filepath.Join(t.TempDir(), "egress.sock")
	cfg := egress.Config{Ports: []int{port}, Resolver: &fakeResolver{answers: map[string][]string{"echo.example.com": {"127.0.0.1"}}}}
	stop, err := egress.ListenUnix(t.Context(), sock, p, cfg, nil)
	require.NoError(t, err)
	h := &proxyHarness{sock: sock, events: &events{}, stop: stop}
	target := net.JoinHostPort("echo.example.com", strconv.Itoa(port))
	resp, _, c := h.roundTrip(t, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, stop())
	require.NoError(t, stop(), "stop is idempotent")
	_, err = io.ReadAll(c)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "tunnel was not closed: %v", err)
	_, err = os.Lstat(sock)
	require.ErrorIs(t, err, os.ErrNotExist)

	// A stale socket is replaced; any other file is not.
	stop, err = egress.ListenUnix(t.Context(), sock, p, cfg, nil)
	require.NoError(t, err)
	require.NoError(t, stop())
	require.NoError(t, os.WriteFile(sock, []byte("x"), 0o600))
	_, err = egress.ListenUnix(t.Context(), sock, p, cfg, nil)
	require.ErrorContains(t, err, "is not a socket")
}

// TestListenUnixStopLeavesANewerSocket: a session's proxy started again at
// the same path (the next claim's environment, opened before the last one
// was closed) keeps its socket when the older proxy stops: the older one
// removes only its own file.
func TestListenUnixStopLeavesANewerSocket(t *testing.T) {
	t.Parallel()
	p, err := egress.NewPolicy([]string{"example.com"})
	require.NoError(t, err)
	sock := filepath.Join(t.TempDir(), "egress.sock")
	older, err := egress.ListenUnix(t.Context(), sock, p, egress.Config{}, nil)
	require.NoError(t, err)
	newer, err := egress.ListenUnix(t.Context(), sock, p, egress.Config{}, nil)
	require.NoError(t, err)
	require.NoError(t, older())
	c, err := net.Dial("unix", sock)
	require.NoError(t, err, "the newer proxy's socket is still there")
	require.NoError(t, c.Close())
	require.NoError(t, newer())
	_, err = os.Lstat(sock)
	require.ErrorIs(t, err, os.ErrNotExist, "the newer proxy removes its own socket")
}

func TestListenUnixValidates(t *testing.T) {
	t.Parallel()
	p, err := egress.NewPolicy(nil)
	require.NoError(t, err)
	_, err = egress.ListenUnix(t.Context(), filepath.Join(t.TempDir(), "s"), nil, egress.Config{}, nil)
	require.ErrorContains(t, err, "nil policy")
	_, err = egress.ListenUnix(t.Context(), filepath.Join(t.TempDir(), "s"), p, egress.Config{Ports: []int{70000}}, nil)
	require.ErrorContains(t, err, "Ports[0]")
	_, err = egress.ListenUnix(t.Context(), "/"+strings.Repeat("a", 200), p, egress.Config{}, nil)
	require.ErrorContains(t, err, "socket path is 201 bytes")
}

// Serve ends when its context does, and returns nil.
func TestServeEndsWithContext(t *testing.T) {
	t.Parallel()
	p, err := egress.NewPolicy(nil)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- egress.Serve(ctx, ln, p, egress.Config{}, nil) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "CONNECT evil.example.net:443 HTTP/1.1\r\nHost: evil.example.net:443\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}
