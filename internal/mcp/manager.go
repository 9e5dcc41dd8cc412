package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of Config.
const (
	// DefaultMaxFailures is how many times in a row a server may fail to
	// start, or die, before the manager gives up on it.
	DefaultMaxFailures = 3
	// DefaultInitialBackoff is the wait before the first restart.
	DefaultInitialBackoff = 500 * time.Millisecond
	// DefaultMaxBackoff caps the wait before a restart.
	DefaultMaxBackoff = 10 * time.Second
	// DefaultConnectTimeout bounds starting a server and the MCP
	// handshake (npx may download the server first).
	DefaultConnectTimeout = 2 * time.Minute
	// DefaultCallTimeout bounds a call whose request has no timeout.
	DefaultCallTimeout = 5 * time.Minute
	// DefaultListTimeout bounds listing a server's tools.
	DefaultListTimeout = time.Minute
)

// IdempotencyKeyMeta is the _meta key of a tools/call request that carries
// the call's idempotency key: the same on every attempt of one call, so a
// server that honours it can tell a repeat from a new call.
const IdempotencyKeyMeta = "dev.longhaul/idempotency-key"

// Dialer reaches one MCP server. Each Dial is a new connection: for a
// stdio server, a new process.
type Dialer interface {
	Dial(ctx context.Context) (*Link, error)
}

// Link is one connection to a server: the transport the client speaks MCP
// over, and what to do when it is over.
type Link struct {
	Transport sdk.Transport
	// Close releases what Dial started (a stdio server's process), after
	// the MCP session is closed. Nil: nothing to release.
	Close func()
	// Diagnose says what became of the server once the connection broke
	// ("exit status 3; stderr: ..."). Nil: nothing to add.
	Diagnose func() string
}

// Server is one MCP server a Manager reaches.
type Server struct {
	Name   string
	Dialer Dialer
}

// Config configures a Manager; nil means the defaults.
type Config struct {
	// MaxFailures is how many times in a row a server may fail to start,
	// or die, before calls to it fail without another start. A call or a
	// listing that gets an answer resets the count. Default
	// DefaultMaxFailures.
	MaxFailures int
	// InitialBackoff is the wait before a restart; it doubles with each
	// failure in a row, up to MaxBackoff. Defaults DefaultInitialBackoff
	// and DefaultMaxBackoff.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// ConnectTimeout bounds a start and its handshake. Default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ListTimeout bounds a listing. Default DefaultListTimeout.
	ListTimeout time.Duration
	// After waits (the engine's clock). Default time.After.
	After func(time.Duration) <-chan time.Time
	// Logger receives the SDK's and the manager's operational logs.
	// Default: discarded.
	Logger *slog.Logger
	// Version is the client version the servers are told. Default "dev".
	Version string
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	switch {
	case out.MaxFailures < 0:
		return out, errors.New("mcp config: MaxFailures: must be >= 0")
	case out.InitialBackoff < 0:
		return out, errors.New("mcp config: InitialBackoff: must be >= 0")
	case out.MaxBackoff < 0:
		return out, errors.New("mcp config: MaxBackoff: must be >= 0")
	case out.ConnectTimeout < 0:
		return out, errors.New("mcp config: ConnectTimeout: must be >= 0")
	case out.ListTimeout < 0:
		return out, errors.New("mcp config: ListTimeout: must be >= 0")
	}
	if out.MaxFailures == 0 {
		out.MaxFailures = DefaultMaxFailures
	}
	if out.InitialBackoff == 0 {
		out.InitialBackoff = DefaultInitialBackoff
	}
	if out.MaxBackoff == 0 {
		out.MaxBackoff = DefaultMaxBackoff
	}
	if out.ConnectTimeout == 0 {
		out.ConnectTimeout = DefaultConnectTimeout
	}
	if out.ListTimeout == 0 {
		out.ListTimeout = DefaultListTimeout
	}
	if out.After == nil {
		out.After = time.After
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Version == "" {
		out.Version = "dev"
	}
	return out, nil
}

// Manager holds one client connection per server for one session runner:
// it connects lazily, restarts a server that died (with backoff, a bounded
// number of times in a row), and closes every connection on Close. It is
// safe for concurrent use.
type Manager struct {
	cfg     Config
	servers map[string]*server

	mu     sync.Mutex
	closed bool
}

// server is the state of one server.
type server struct {
	name   string
	dialer Dialer

	// mu serialises starts and guards the fields below.
	mu       sync.Mutex
	cur      *conn
	gen      int   // connections made so far
	failures int   // failed starts and deaths in a row
	lastErr  error // the last of them
}

// conn is one live connection.
type conn struct {
	session *sdk.ClientSession
	link    *Link
	gen     int
	dead    chan struct{} // closed once the session ended
	once    sync.Once
}

func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// close ends the session and releases the link, once.
func (c *conn) close() {
	c.once.Do(func() {
		_ = c.session.Close()
		if c.link.Close != nil {
			c.link.Close()
		}
	})
}

// diagnose is what became of the server, when the link can tell.
func (c *conn) diagnose() string {
	if c.link.Diagnose == nil {
		return ""
	}
	return c.link.Diagnose()
}

// NewManager returns a manager of servers. Names must be unique and every
// server needs a Dialer.
func NewManager(servers []Server, cfg *Config) (*Manager, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: c, servers: make(map[string]*server, len(servers))}
	for i, s := range servers {
		switch {
		case s.Name == "":
			return nil, fmt.Errorf("mcp: servers[%d].name: is required", i)
		case s.Dialer == nil:
			return nil, fmt.Errorf("mcp: servers[%d].dialer: is required", i)
		case m.servers[s.Name] != nil:
			return nil, fmt.Errorf("mcp: servers[%d].name: duplicate server %q", i, s.Name)
		}
		m.servers[s.Name] = &server{name: s.Name, dialer: s.Dialer}
	}
	return m, nil
}

// errClosed is the error of a call on a closed manager.
var errClosed = errors.New("mcp: manager is closed")

func (m *Manager) server(name string) (*server, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	s := m.servers[name]
	if s == nil {
		return nil, fmt.Errorf("mcp: unknown server %q", name)
	}
	return s, nil
}

// Generation is how many connections to the server were made so far: it
// grows by one with every restart. 0: not connected yet.
func (m *Manager) Generation(name string) int {
	s := m.servers[name]
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Close closes every connection (stopping stdio servers) and makes later
// calls fail. It is safe to call more than once.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range m.servers {
		s.mu.Lock()
		c := s.cur
		s.cur = nil
		s.mu.Unlock()
		if c != nil {
			wg.Go(c.close)
		}
	}
	wg.Wait()
}

// UnavailableError is a server that could not be reached: it failed to
// start (or died) too many times in a row. Nothing was sent to it.
type UnavailableError struct {
	Server   string
	Failures int
	Err      error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("MCP server %s is unavailable (%d failed starts in a row): %v", e.Server, e.Failures, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// ensure returns a live connection to s, starting the server (again) when
// there is none: after a failure, it waits the backoff first; after
// MaxFailures in a row it gives up with an *UnavailableError.
func (m *Manager) ensure(ctx context.Context, s *server) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cur; c != nil {
		if c.alive() {
			return c, nil
		}
		// It died since it last answered: that counts as a failure.
		s.cur = nil
		c.close()
		s.failures++
		s.lastErr = deathError(c)
		m.cfg.Logger.Warn("MCP server died", "server", s.name, "err", s.lastErr)
	}
	for {
		if s.failures >= m.cfg.MaxFailures {
			return nil, &UnavailableError{Server: s.name, Failures: s.failures, Err: s.lastErr}
		}
		if s.failures > 0 {
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-m.cfg.After(m.backoff(s.failures)):
			}
		}
		c, err := m.connect(ctx, s)
		if err == nil {
			s.gen++
			c.gen = s.gen
			s.cur = c
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		s.failures++
		s.lastErr = err
		m.cfg.Logger.Warn("MCP server did not start", "server", s.name, "failures", s.failures, "err", err)
	}
}

// backoff is the wait before the start that follows n failures in a row.
func (m *Manager) backoff(n int) time.Duration {
	d := m.cfg.InitialBackoff
	for i := 1; i < n && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, m.cfg.MaxBackoff)
}

// deathError says why a connection that was live ended.
func deathError(c *conn) error {
	msg := "the connection ended"
	if d := c.diagnose(); d != "" {
		msg += ": " + d
	}
	return errors.New(msg)
}

// connect starts the server and does the MCP handshake.
func (m *Manager) connect(ctx context.Context, s *server) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ConnectTimeout)
	defer cancel()
	link, err := s.dialer.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "longhaul", Version: m.cfg.Version}, &sdk.ClientOptions{
		Logger: m.cfg.Logger,
		// No roots, sampling or elicitation: a server gets tools/call and
		// tools/list from us, and nothing it could ask back.
		Capabilities: &sdk.ClientCapabilities{},
	})
	session, err := client.Connect(ctx, link.Transport, nil)
	if err != nil {
		if link.Close != nil {
			link.Close()
		}
		msg := err.Error()
		if link.Diagnose != nil {
			if d := link.Diagnose(); d != "" {
				msg += "; " + d
			}
		}
		return nil, fmt.Errorf("handshake: %s", msg)
	}
	c := &conn{session: session, link: link, dead: make(chan struct{})}
	go func() {
		_ = session.Wait()
		close(c.dead)
	}()
	return c, nil
}

// succeeded resets the failure count: the server answered.
func (s *server) succeeded() {
	s.mu.Lock()
	s.failures, s.lastErr = 0, nil
	s.mu.Unlock()
}

// drop forgets c, if it is still the current connection, and closes it.
func (s *server) drop(c *conn) {
	s.mu.Lock()
	if s.cur == c {
		s.cur = nil
		s.failures++
		s.lastErr = deathError(c)
	}
	s.mu.Unlock()
	c.close()
}

// Listing is a server's tools, as one connection listed them.
type Listing struct {
	Tools         []*sdk.Tool
	ServerName    string
	ServerVersion string
	// Generation is the connection that answered (see
	// Manager.Generation).
	Generation int
}

// List returns the server's tools, connecting (or restarting it) first if
// need be. A server that dies while listing is restarted within the
// failure bound; a protocol error is returned as it is.
func (m *Manager) List(ctx context.Context, name string) (*Listing, error) {
	s, err := m.server(name)
	if err != nil {
		return nil, err
	}
	for {
		c, err := m.ensure(ctx, s)
		if err != nil {
			return nil, err
		}
		lctx, cancel := context.WithTimeout(ctx, m.cfg.ListTimeout)
		var tools []*sdk.Tool
		for t, err2 := range c.session.Tools(lctx, nil) {
			if err2 != nil {
				err = err2
				break
			}
			tools = append(tools, t)
		}
		cancel()
		if err == nil {
			s.succeeded()
			l := &Listing{Tools: tools, Generation: c.gen}
			if init := c.session.InitializeResult(); init != nil && init.ServerInfo != nil {
				l.ServerName, l.ServerVersion = init.ServerInfo.Name, init.ServerInfo.Version
			}
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if isProtocolError(err) {
			return nil, fmt.Errorf("list the tools of MCP server %s: %w", name, err)
		}
		// The connection broke (or the listing timed out): start over.
		s.drop(c)
	}
}

// CallRequest is one tools/call.
type CallRequest struct {
	Server string
	// Tool is the server's name of the tool.
	Tool      string
	Arguments json.RawMessage
	// IdempotencyKey is sent in the request's _meta (IdempotencyKeyMeta).
	IdempotencyKey string
	// Timeout bounds the call (0: DefaultCallTimeout).
	Timeout time.Duration
}

// CallResult is how a call went, in the terms the engine's effect rules
// need.
type CallResult struct {
	// Output is what the model reads of a successful call (see Output).
	Output any
	// Error is what the model reads of a failed one: the tool's own error
	// (isError), a protocol error, or why the server could not be
	// reached or lost.
	Error string
	// Transient: the failure may not happen again (the server could not
	// be started, or was lost): a call that may be re-run is retried.
	Transient bool
	// Unknown: the request was sent, and the connection broke or the call
	// timed out before the answer: whether the tool took effect is not
	// known. Lost says what happened.
	Unknown bool
	Lost    string
}

// Call calls a tool. It never returns a Go error: every outcome is a
// CallResult, so the caller applies the effect rules to it. A server that
// is down is started (again) first; a request is sent at most once.
func (m *Manager) Call(ctx context.Context, req *CallRequest) *CallResult {
	s, err := m.server(req.Server)
	if err != nil {
		return &CallResult{Error: err.Error()}
	}
	c, err := m.ensure(ctx, s)
	if err != nil {
		// Nothing was sent: the call did not happen.
		return &CallResult{Error: err.Error(), Transient: true}
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := req.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &sdk.CallToolParams{Name: req.Tool, Arguments: args}
	if req.IdempotencyKey != "" {
		params.Meta = sdk.Meta{IdempotencyKeyMeta: req.IdempotencyKey}
	}
	res, err := c.session.CallTool(cctx, params)
	switch {
	case err == nil:
		s.succeeded()
		return result(res)
	case ctx.Err() != nil:
		// The caller gave up (its lease, a hard stop): it knows.
		return &CallResult{Error: "cancelled: " + context.Cause(ctx).Error(), Unknown: true, Lost: "cancelled"}
	case isProtocolError(err):
		// The server answered, with an error: the call did not run.
		s.succeeded()
		return &CallResult{Error: fmt.Sprintf("MCP server %s refused the call: %s", req.Server, protocolMessage(err))}
	case cctx.Err() != nil:
		// The server may still be working on it; the request was
		// cancelled (notifications/cancelled) but whether it took effect
		// is not known.
		return &CallResult{
			Error:     fmt.Sprintf("the call to MCP server %s timed out after %s; whether it took effect is unknown", req.Server, timeout),
			Transient: true, Unknown: true, Lost: "timed out after " + timeout.String(),
		}
	default:
		// The link's diagnosis waits a moment for a stdio server's
		// process to be gone, so what it left on stderr is in the report.
		lost := err.Error()
		if d := c.diagnose(); d != "" {
			lost += "; " + d
		}
		s.drop(c)
		return &CallResult{
			Error:     fmt.Sprintf("the connection to MCP server %s broke during the call (%s); whether it took effect is unknown", req.Server, lost),
			Transient: true, Unknown: true, Lost: lost,
		}
	}
}
