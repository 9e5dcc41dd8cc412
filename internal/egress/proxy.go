package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// readHeaderTimeout bounds how long a client may take to send a request
// header to the proxy.
const readHeaderTimeout = 30 * time.Second

// maxUnixSocketPath is the longest socket path every supported platform
// binds (sun_path is 108 bytes on Linux, 104 on the BSDs, NUL included).
const maxUnixSocketPath = 103

// Serve serves the egress proxy for one session on ln until ctx ends: HTTP
// CONNECT tunnels (for HTTPS and anything else over TCP) and plain HTTP
// requests in absolute form ("GET http://host/path"). Every destination goes
// through policy (with cfg) and every decision, allowed or refused, is
// passed to onEvent with Via "proxy": one per tunnel and one per upstream
// connection (plain HTTP requests to one host reuse a kept-alive
// connection, already decided). onEvent is never called concurrently and
// should not block: connections wait for it. A refusal is answered 403 with
// a one-line reason; a failure to connect, 502.
//
// Serve closes ln, and before it returns every connection it accepted,
// tunnels included. It returns nil when ctx ended, or the listener's error.
func Serve(ctx context.Context, ln net.Listener, policy *Policy, cfg Config, onEvent func(Event)) error {
	if policy == nil {
		return errors.New("serve egress proxy: nil policy")
	}
	p, err := policy.WithConfig(cfg)
	if err != nil {
		return fmt.Errorf("serve egress proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	log := cfg.logger()
	px := &proxy{policy: p, idle: cfg.idleTimeout(), onEvent: onEvent, log: log}
	px.transport = &http.Transport{
		Proxy:                  nil, // never chain to the server's own proxy settings
		DialContext:            px.dialUpstream,
		MaxResponseHeaderBytes: int64(cfg.maxHeaderBytes()),
		ResponseHeaderTimeout:  px.idle,
		IdleConnTimeout:        px.idle,
		MaxIdleConnsPerHost:    4,
		// Pass bodies through as the server sent them.
		DisableCompression: true,
	}
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	px.forwarder = &httputil.ReverseProxy{
		// The incoming URL is absolute and already the destination. The
		// ReverseProxy has removed hop-by-hop headers (Connection and the
		// ones it names, Proxy-Authorization, Proxy-Connection, Keep-Alive,
		// TE, Trailer, Transfer-Encoding, Upgrade) and X-Forwarded-*; none
		// is added, so nothing about the sandbox leaks out.
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Host = ""
			pr.Out.Header.Del("Proxy-Authorization")
		},
		Transport:    px.transport,
		ErrorHandler: px.forwardError,
		ErrorLog:     errorLog,
	}
	srv := &http.Server{
		Handler:           px,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       px.idle,
		MaxHeaderBytes:    cfg.maxHeaderBytes(),
		ErrorLog:          errorLog,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	// Refuse new handlers, end the ones running (their contexts derive from
	// ctx; tunnels close both ends on it), and close every connection.
	px.closing()
	cancel()
	_ = srv.Close()
	if serveErr == nil {
		serveErr = <-served
	}
	px.handlers.Wait()
	px.transport.CloseIdleConnections()
	if errors.Is(serveErr, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve egress proxy: %w", serveErr)
}

// ListenUnix creates a Unix socket at path and serves the proxy on it (see
// Serve) until ctx ends or stop is called; stop waits for the proxy to end,
// removes the socket and returns Serve's error. A stale socket at path is
// replaced; any other file there is an error.
//
// The socket is 0600. A bubblewrap sandbox runs in a user namespace that maps
// its user to the server's uid, and the kernel checks the socket's
// permissions against that outside uid, so owner-only access lets the
// sandbox connect and keeps every other user out. Pathname sockets are
// reached through the file system, not the network namespace, so a sandbox
// without a network can use it once the socket is bound into its mount
// namespace. Put it in a directory only the server's user can enter: the
// permissions are set right after bind.
func ListenUnix(ctx context.Context, path string, policy *Policy, cfg Config, onEvent func(Event)) (stop func() error, err error) {
	if policy == nil {
		return nil, errors.New("listen egress proxy: nil policy")
	}
	if _, err := policy.WithConfig(cfg); err != nil {
		return nil, fmt.Errorf("listen egress proxy: %w", err)
	}
	if path == "" {
		return nil, errors.New("listen egress proxy: empty socket path")
	}
	if len(path) > maxUnixSocketPath {
		return nil, fmt.Errorf("listen egress proxy: socket path is %d bytes; at most %d are portable", len(path), maxUnixSocketPath)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen egress proxy: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen egress proxy: remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen egress proxy: %w", err)
	}
	// The socket's file is removed at stop only while it is still this
	// listener's: a proxy of the same session started meanwhile (the
	// next claim's environment, opened before the last one was closed)
	// has replaced it at the same path, and closing this listener must
	// not unlink that one, which would cut its sandbox off the network.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ours, err := os.Lstat(path)
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen egress proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, policy, cfg, onEvent) }()
	var (
		once     sync.Once
		stopErr  error
		stopFunc = func() error {
			once.Do(func() {
				cancel()
				stopErr = <-done
				if fi, err := os.Lstat(path); err == nil && os.SameFile(fi, ours) {
					_ = os.Remove(path)
				}
			})
			return stopErr
		}
	)
	return stopFunc, nil
}

// proxy is one session's proxy.
type proxy struct {
	policy    *Policy
	idle      time.Duration
	transport *http.Transport
	forwarder *httputil.ReverseProxy
	log       *slog.Logger

	eventMu sync.Mutex
	onEvent func(Event)

	// handlers counts running handlers; mu and closed make sure none is
	// added once Serve waits for them.
	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup
}

func (px *proxy) emit(ev Event) {
	if px.onEvent == nil {
		return
	}
	ev.Via = "proxy"
	px.eventMu.Lock()
	defer px.eventMu.Unlock()
	px.onEvent(ev)
}

func (px *proxy) enter() bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.closed {
		return false
	}
	px.handlers.Add(1)
	return true
}

func (px *proxy) closing() {
	px.mu.Lock()
	px.closed = true
	px.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (px *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !px.enter() {
		http.Error(w, "longhaul egress proxy: shutting down", http.StatusServiceUnavailable)
		return
	}
	defer px.handlers.Done()
	switch {
	case r.Method == http.MethodConnect:
		px.connect(w, r)
	case r.URL.IsAbs() && r.URL.Host != "":
		px.forward(w, r)
	default:
		http.Error(w, "longhaul egress proxy: send CONNECT host:port, or a request with an absolute URL (http://host/path)", http.StatusBadRequest)
	}
}

// refuse answers a refused destination.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, "longhaul egress proxy: "+msg, status)
}

// connect opens a tunnel.
func (px *proxy) connect(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Host
	if target == "" {
		target = r.Host
	}
	host, portStr, err := net.SplitHostPort(target)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 1 || port > 65535 || host == "" {
		reason := fmt.Sprintf("CONNECT target %q is not host:port", target)
		px.emit(Event{Host: target, Reason: reason})
		refuse(w, http.StatusBadRequest, reason)
		return
	}
	upstream, ev, err := px.policy.Dial(r.Context(), "tcp", host, port)
	px.emit(ev)
	if err != nil {
		px.dialFailed(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		refuse(w, http.StatusInternalServerError, "connection cannot be tunnelled")
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		px.log.Warn("egress proxy: hijack", "error", err)
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		upstream.Close()
		return
	}
	// A client may send its first bytes (a TLS ClientHello) right behind
	// the CONNECT; the server's reader may hold them.
	if n := brw.Reader.Buffered(); n > 0 {
		buf, _ := brw.Reader.Peek(n)
		if _, err := upstream.Write(buf); err != nil {
			client.Close()
			upstream.Close()
			return
		}
	}
	px.tunnel(r.Context(), client, upstream)
}

func (px *proxy) dialFailed(w http.ResponseWriter, err error) {
	var refused *RefusedError
	if errors.As(err, &refused) {
		refuse(w, http.StatusForbidden, refused.Error())
		return
	}
	refuse(w, http.StatusBadGateway, err.Error())
}

// forward proxies one plain HTTP request.
func (px *proxy) forward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" {
		refuse(w, http.StatusBadRequest, fmt.Sprintf("cannot proxy %s:// URLs; use CONNECT for https", r.URL.Scheme))
		return
	}
	px.forwarder.ServeHTTP(w, r)
}

func (px *proxy) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The client left or the proxy is stopping: nobody reads an answer.
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	px.dialFailed(w, err)
}

// dialUpstream is the transport's dialer for plain HTTP: every new
// connection is a policy decision.
func (px *proxy) dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: bad port", addr)
	}
	conn, ev, err := px.policy.Dial(ctx, network, host, port)
	px.emit(ev)
	if err != nil {
		return nil, err
	}
	return &idleConn{Conn: conn, idle: px.idle}, nil
}

// idleConn fails a read or write that waits longer than idle, so a silent
// remote server cannot hold a proxy connection forever.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	// Deadlines are absolute wall-clock times: the clock is the kernel's.
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

// tunnel copies bytes both ways until both sides are done, either fails,
// nothing moves in either direction for px.idle, or ctx ends.
func (px *proxy) tunnel(ctx context.Context, client, upstream net.Conn) {
	closeBoth := func() {
		client.Close()
		upstream.Close()
	}
	defer closeBoth()
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()

	var last atomic.Int64 // unix nanoseconds of the last byte moved either way
	last.Store(time.Now().UnixNano())
	errs := make(chan error, 2)
	go func() { errs <- px.pipe(upstream, client, &last) }()
	go func() { errs <- px.pipe(client, upstream, &last) }()
	if err := <-errs; err != nil {
		closeBoth()
	}
	<-errs
}

// pipe copies src to dst. An idle read is given more time while the other
// direction is busy (a long download sends nothing upstream). At EOF it
// half-closes dst, so the other direction can finish.
func (px *proxy) pipe(dst, src net.Conn, last *atomic.Int64) error {
	buf := make([]byte, 32<<10)
	deadline := time.Now().Add(px.idle)
	for {
		_ = src.SetReadDeadline(deadline)
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			_ = dst.SetWriteDeadline(time.Now().Add(px.idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			now := time.Now()
			last.Store(now.UnixNano())
			deadline = now.Add(px.idle)
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			cw, ok := dst.(interface{ CloseWrite() error })
			if !ok {
				return errNoHalfClose
			}
			_ = cw.CloseWrite()
			return nil
		case isTimeout(err):
			next := time.Unix(0, last.Load()).Add(px.idle)
			if !next.After(time.Now()) {
				return fmt.Errorf("tunnel idle for %s", px.idle)
			}
			deadline = next
		default:
			return err
		}
	}
}

// errNoHalfClose ends a tunnel whose other side cannot be half-closed.
var errNoHalfClose = errors.New("connection cannot be half-closed")

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
