package node

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// HTTPLimits bound what one client can hold of a server: how long it may
// take to send a request, how long a response may take to write, how long
// an idle keep-alive connection stays open, and how many connections one
// address may hold at once. Without them a client that sends one byte of
// its body and then nothing, or opens connections and never uses them,
// keeps them (and their goroutines and file descriptors) for ever. Zero
// fields mean the defaults below; a negative one turns that limit off.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's header.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, header and body.
	// net/http lifts it once the body is read, so a handler that runs
	// longer is not cut off.
	ReadTimeout time.Duration
	// WriteTimeout bounds a response, from the end of its request's
	// header. Event streams lift it for themselves (they last until the
	// client leaves) and bound each of their writes instead.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection waits for its next
	// request.
	IdleTimeout time.Duration
	// MaxConnsPerIP caps the connections one remote IP address holds open
	// at once; a connection past the cap is answered 429 and closed.
	MaxConnsPerIP int
}

// Default HTTP limits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 2 * time.Minute
	DefaultIdleTimeout       = 30 * time.Second
	DefaultMaxConnsPerIP     = 128
)

// withDefaults returns l with every zero field set to its default and every
// negative one to zero (off).
func (l HTTPLimits) withDefaults() HTTPLimits {
	dur := func(v, def time.Duration) time.Duration {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	l.ReadHeaderTimeout = dur(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	l.ReadTimeout = dur(l.ReadTimeout, DefaultReadTimeout)
	l.WriteTimeout = dur(l.WriteTimeout, DefaultWriteTimeout)
	l.IdleTimeout = dur(l.IdleTimeout, DefaultIdleTimeout)
	switch {
	case l.MaxConnsPerIP == 0:
		l.MaxConnsPerIP = DefaultMaxConnsPerIP
	case l.MaxConnsPerIP < 0:
		l.MaxConnsPerIP = 0
	}
	return l
}

// HTTPServer returns an http.Server serving h within l's timeouts, logging
// its connection errors to log at warn level. Serve it on
// LimitConnsPerIP's listener to apply l.MaxConnsPerIP too.
func HTTPServer(h http.Handler, l HTTPLimits, log *slog.Logger) *http.Server {
	l = l.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// LimitConnsPerIP wraps ln so that one remote IP address holds at most
// l.MaxConnsPerIP of its connections at once (ln itself when the cap is
// off). A connection past the cap gets a 429 and is closed, net/http never
// sees it, so a flood from one address costs the server a short write per
// connection and leaves the other addresses served.
func LimitConnsPerIP(ln net.Listener, l HTTPLimits) net.Listener {
	l = l.withDefaults()
	if l.MaxConnsPerIP == 0 {
		return ln
	}
	return &perIPListener{Listener: ln, max: l.MaxConnsPerIP, open: make(map[netip.Addr]int),
		refusing: make(chan struct{}, maxRefusing)}
}

type perIPListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[netip.Addr]int
	// refusing holds a token per refusal under way.
	refusing chan struct{}
}

// refusal is what a connection past the cap reads: a complete HTTP
// response in the API's error shape, after which the server closes it.
const refusalBody = `{"error":{"code":"rate_limited","message":"too many open connections from this address: close some and retry"}}` + "\n"

var refusal = []byte(fmt.Sprintf("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"+
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(refusalBody), refusalBody))

// A refusal is written and the client's request drained within
// refusalTimeout (a client that does not read is not waited for), reading
// at most refusalDrainBytes; at most maxRefusing are under way at once.
const (
	refusalTimeout    = time.Second
	refusalDrainBytes = 64 << 10
	maxRefusing       = 64
)

func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, ok := remoteIP(c)
		if !ok {
			return c, nil // not TCP (a test's pipe): nothing to count by
		}
		l.mu.Lock()
		if l.open[ip] >= l.max {
			l.mu.Unlock()
			l.refuse(c)
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *perIPListener) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// refuse answers a connection past the cap and closes it. Closing a socket
// with unread bytes makes the kernel send a reset, which can destroy the
// answer before the client reads it; so it half-closes, then reads what
// the client sent for a moment (as net/http does) before closing. At most
// maxRefusing connections linger at once: past that, under a flood, a
// connection is closed without an answer, so the refusals themselves never
// hold more than a bounded number of descriptors.
func (l *perIPListener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		deadline := time.Now().Add(refusalTimeout)
		_ = c.SetDeadline(deadline)
		_, _ = c.Write(refusal)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.CopyN(io.Discard, c, refusalDrainBytes)
		_ = c.Close()
	}()
}

// remoteIP is the remote address of a TCP connection, IPv4-mapped IPv6
// addresses counted as their IPv4 address.
func remoteIP(c net.Conn) (netip.Addr, bool) {
	tcp, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	return ip.Unmap(), ok
}

// countedConn gives its slot back once, when closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
