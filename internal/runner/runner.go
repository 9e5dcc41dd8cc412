package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// ConnectPath is the server's route a runner connects to.
const ConnectPath = "/v1/runners/connect"

// Defaults of Config.
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Minute
)

// Config configures a Runner.
type Config struct {
	// Server is the server's base URL (http or https). Required. Plain
	// http is refused unless the host is loopback or Insecure is set: the
	// key would travel in the clear.
	Server string
	// Insecure allows a plain http Server that is not loopback.
	Insecure bool
	// Key is the runner's API key (role runner). Required.
	Key string
	// Hello is who the runner says it is. Required (checked by
	// link.Hello.Check). Its Protocol defaults to link.ProtocolVersion,
	// the protocol this package speaks (a test sets an older one to play
	// an old runner).
	Hello link.Hello
	// DataDir holds the sessions' workspaces (DataDir/workspaces).
	// Required.
	DataDir string
	// Backend runs the commands. Required.
	Backend sandbox.Backend
	// Limits bound each command (zero fields: the sandbox's defaults);
	// for an environment the server opens, each field set here is the most
	// it may ask for (and what it gets when it asks for nothing).
	Limits sandbox.Limits
	// BlobCacheBytes bounds the cache of snapshot blobs under DataDir/blobs.
	// Default DefaultBlobCacheBytes.
	BlobCacheBytes int64
	// SocketDir holds the egress proxies' Unix sockets. Default:
	// DataDir/sockets; where that path is too long for a socket, a private
	// temporary directory (environment.LocalConfig.SocketDir).
	SocketDir string
	// MinBackoff is the first wait before dialling again. Default
	// DefaultMinBackoff.
	MinBackoff time.Duration
	// MaxBackoff caps the wait. Default DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Link tunes the connection (frame limit, heartbeats). Default nil:
	// link's defaults.
	Link *link.Config
	// HTTPClient dials. Default http.DefaultClient.
	HTTPClient *http.Client
	// OnConnect, when set, is told of each accepted connection.
	OnConnect func(link.Welcome)
	// Jitter returns a number in [0, 1) (Backoff's). Default
	// math/rand/v2.Float64.
	Jitter func() float64
	// Now is the clock of the runner's own bounds on a connection's
	// environments (unclaimed opens, idle uploads). Default time.Now
	// (tests set it).
	Now func() time.Time
	// Logger receives connections, ends and refusals. Default
	// slog.Default().
	Logger *slog.Logger
}

// validate names the first invalid field of c.
func (c *Config) validate() error {
	u, err := url.Parse(c.Server)
	switch {
	case c.Server == "":
		return errors.New("server: is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("server: %q is not an http:// or https:// URL", c.Server)
	case u.User != nil:
		return errors.New("server: must not hold credentials (give the key with --key)")
	case u.Scheme == "http" && !c.Insecure && !isLoopback(u.Hostname()):
		return fmt.Errorf("server: %q is plain http to a host that is not loopback: the key would travel in the clear (use https, or --insecure)", c.Server)
	case strings.TrimSpace(c.Key) == "":
		return errors.New("key: is required")
	case strings.ContainsAny(c.Key, " \t\r\n"):
		return errors.New("key: contains whitespace")
	case c.DataDir == "":
		return errors.New("data: is required")
	case c.Backend == nil:
		return errors.New("backend: is required")
	case c.MinBackoff < 0 || c.MaxBackoff < 0:
		return errors.New("backoff: must not be negative")
	}
	return c.Hello.Check()
}

// isLoopback says whether host (a URL's hostname) is this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Runner connects to the server and answers its calls.
type Runner struct {
	cfg     Config
	log     *slog.Logger
	data    string // DataDir, absolute
	work    string // DataDir/workspaces
	uploads string // DataDir/uploads: fs.write parts
	sockets string
	// envs is the local environment backend on this machine: the server's
	// environments live in it (env.go).
	envs  environment.Backend
	blobs *blobCache
}

// New checks cfg and returns a Runner; the error names the first invalid
// field.
func New(cfg Config) (*Runner, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("runner config: %w", err)
	}
	if cfg.Hello.Protocol == 0 {
		cfg.Hello.Protocol = link.ProtocolVersion
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("runner config: data: %w", err)
	}
	work := filepath.Join(abs, "workspaces")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, fmt.Errorf("runner config: data: %w", err)
	}
	r := &Runner{cfg: cfg, log: cfg.Logger, data: abs, work: work, uploads: filepath.Join(abs, "uploads"), sockets: cfg.SocketDir}
	if r.sockets == "" {
		// Inside the runner's own data directory, never a name in the
		// shared temporary directory that another user of the machine
		// could make first and swap a socket in (a path too long for a
		// socket falls back to the local backend's private directory).
		r.sockets = filepath.Join(abs, "sockets")
	}
	// Parts of writes a previous run did not finish are of no use.
	_ = os.RemoveAll(r.uploads)
	if err := os.MkdirAll(r.uploads, 0o700); err != nil {
		return nil, fmt.Errorf("runner config: data: %w", err)
	}
	if cfg.BlobCacheBytes <= 0 {
		cfg.BlobCacheBytes = DefaultBlobCacheBytes
	}
	if r.blobs, err = newBlobCache(filepath.Join(abs, "blobs"), cfg.BlobCacheBytes, r.log.Warn); err != nil {
		return nil, fmt.Errorf("runner config: data: %w", err)
	}
	spaces, err := workspace.New(work)
	if err != nil {
		return nil, fmt.Errorf("runner config: data: %w", err)
	}
	// A record per workspace for as many sessions as the runner serves at
	// once, so that their checkpoints are incremental (snapshot.RecordsFor).
	cache, err := snapshot.NewCache(r.blobs, &snapshot.CacheConfig{MaxRecords: snapshot.RecordsFor(cfg.Hello.Capacity)})
	if err != nil {
		return nil, fmt.Errorf("runner config: %w", err)
	}
	r.envs, err = environment.NewLocal(&environment.LocalConfig{Sandbox: cfg.Backend, Workspaces: spaces, Blobs: r.blobs, Cache: cache, SocketDir: r.sockets, Logger: r.log})
	if err != nil {
		return nil, fmt.Errorf("runner config: %w", err)
	}
	return r, nil
}

// ErrRefused wraps the reason the server gave for a runner that must not
// come back (Run's error).
var ErrRefused = errors.New("the server refused this runner")

// Run connects, serves, and connects again after each end, until ctx ends
// (nil) or the server refuses the runner for good (an error wrapping
// ErrRefused).
func (r *Runner) Run(ctx context.Context) error {
	attempt := 0
	for {
		accepted, err := r.connectOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrRefused) {
			r.log.Error("the server refused this runner for good: it stops", "err", err)
			return err
		}
		if accepted {
			attempt = 0
		}
		wait := Backoff(attempt, r.cfg.MinBackoff, r.cfg.MaxBackoff, r.cfg.Jitter())
		attempt++
		r.log.Warn("runner connection ended: connecting again", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Backoff is the wait before the attempt-th reconnection (0 the first):
// min doubled per attempt up to max, of which a random half is taken off
// (jitter in [0, 1)), so runners cut off together do not come back
// together.
func Backoff(attempt int, minWait, maxWait time.Duration, jitter float64) time.Duration {
	d := minWait
	for range min(attempt, 62) {
		if d >= maxWait/2 {
			d = maxWait
			break
		}
		d *= 2
	}
	d = min(d, maxWait)
	return d - time.Duration(float64(d/2)*jitter)
}

// connectOnce dials, says hello and serves the connection until it ends;
// accepted says whether the server welcomed it.
func (r *Runner) connectOnce(ctx context.Context) (accepted bool, err error) {
	u := strings.TrimRight(r.cfg.Server, "/") + ConnectPath
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+r.cfg.Key)
	hdr.Set("User-Agent", "longhaul-runner/"+r.cfg.Hello.Version)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ws, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPClient: r.cfg.HTTPClient, HTTPHeader: hdr})
	cancel()
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return false, fmt.Errorf("%w: %s at connect: %s", ErrRefused, resp.Status, responseMessage(resp))
		}
		return false, fmt.Errorf("connect to %s: %w", r.cfg.Server, err)
	}
	defer ws.CloseNow()
	if err := link.WriteJSON(ctx, ws, r.cfg.Hello); err != nil {
		return false, fmt.Errorf("send hello: %w", err)
	}
	var welcome link.Welcome
	if err := link.ReadJSON(ctx, ws, &welcome); err != nil {
		return false, refusal(err, "read welcome")
	}
	r.log.Info("runner connected", "server", r.cfg.Server, "name", r.cfg.Hello.Name, "conn", welcome.ConnectionID, "node", welcome.Node,
		"server_protocol", welcome.ServerProtocol(), "protocol", r.cfg.Hello.Protocol)
	if welcome.Protocol < min(r.cfg.Hello.Protocol, link.ProtocolVersion) {
		// An older server (it took this runner: it needs no call this
		// runner lacks) does not take what it added since: this runner
		// does without, and says so once per connection.
		r.log.Warn(fmt.Sprintf("the server speaks runner protocol %s, this runner %d: it does not take env.abandoned, so the environments this runner closes because the server never claimed them are not reported to it (the server learns of their free slots only as other environments close): upgrade the server",
			welcome.ServerProtocol(), r.cfg.Hello.Protocol))
	}
	if r.cfg.OnConnect != nil {
		r.cfg.OnConnect(welcome)
	}
	lc := link.Config{}
	if r.cfg.Link != nil {
		lc = *r.cfg.Link
	}
	lc.MaxIncoming = r.cfg.Hello.Capacity
	envs := newConnEnvs(r)
	lc.Handlers = envs.handlers()
	lc.Logger = r.log
	conn := link.New(ws, &lc)
	envs.start(conn, welcome.Protocol)
	// The connection's end ends its environments' programs before the
	// runner dials again (Done: every call's handler has returned).
	defer envs.end()
	select {
	case <-conn.Done():
	case <-ctx.Done():
		conn.Close("the runner is stopping")
		<-conn.Done()
		return true, nil
	}
	return true, refusal(conn.Err(), "connection")
}

// refusal wraps err with ErrRefused when the server closed the connection
// with a code that says not to come back, such as a protocol the server
// finds too old (only a new build of the runner helps: it stops, saying
// to upgrade it). A server too old for the runner's Hello (it refuses the
// protocol field it does not know) is not the runner's to fix: it is
// tried again with backoff, each try saying to upgrade the server, so the
// runner comes back by itself once the server is.
func refusal(err error, what string) error {
	var ce websocket.CloseError
	errors.As(err, &ce)
	switch {
	case ce.Code == link.StatusOutdated:
		// The server's reason names the protocol the Hello said.
		return fmt.Errorf("%w: the server needs a newer runner protocol (%s): upgrade longhaul on this machine",
			ErrRefused, ce.Reason)
	case ce.Code == link.StatusBadHello && strings.Contains(ce.Reason, `unknown field "protocol"`):
		return fmt.Errorf("%s: the server is older than this runner (it does not know the runner protocol's versions, so it speaks protocol 1; this runner speaks %d and needs a server of %d or more): upgrade the server, or run the runner of its version: %w",
			what, link.ProtocolVersion, link.MinProtocolVersion, err)
	case ce.Code == link.StatusKeyRevoked, ce.Code == link.StatusBadHello, ce.Code == link.StatusReplaced:
		return fmt.Errorf("%w: %s: %w", ErrRefused, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// responseMessage is the start of a refused upgrade's body (the API's
// error message), printable only.
func responseMessage(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimSpace(string(b)))
}
