package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/webui"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Config tunes a Server. The zero value (and a nil *Config) means defaults.
type Config struct {
	// APIKeys are the bootstrap bearer tokens accepted on /v1/
	// ("Authorization: Bearer <key>"), each an admin of every project.
	// Default: none, and then /v1/ answers loopback peers only (127.0.0.0/8
	// and ::1) and anyone else 403. Keys must not be empty.
	APIKeys []string
	// Keys finds the keys created through POST /v1/keys (the App). With
	// APIKeys set, a token that is no bootstrap key is looked up here on
	// every request; without, a loopback peer's token is (a local user may
	// act as a stored key). Default nil: only the bootstrap keys.
	Keys KeyAuthenticator
	// MaxBodyBytes bounds a request body; a larger body is a 413. Default
	// 1 MiB.
	MaxBodyBytes int64
	// PingInterval is how often an event stream sends a ": ping" comment.
	// (The journals it follows are read again, in case a notice was lost,
	// on the App's poll: internal/node gives app.Deps.PollInterval this
	// value.) Default 15 s.
	PingInterval time.Duration
	// Logger receives internal errors and recovered panics (error level) and
	// one line per request (debug level). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock used for idempotency records and request durations.
	// Default time.Now.
	Now func() time.Time
	// IdempotencyClaimTTL is how long a request with an Idempotency-Key
	// holds its key in the store without renewing it (it renews every
	// third of it while it runs). A request whose node died leaves the
	// key to its client's retry once that much has passed; until then the
	// retry is answered 409. Default 30 s.
	IdempotencyClaimTTL time.Duration
	// NodeID names this node on the claims it holds, so that its next
	// start expires them at once (store.IdempotencyExpireOwner) rather
	// than after IdempotencyClaimTTL. Default "": claims name no node.
	NodeID string
	// Metrics, when set, serves GET /metrics (the Prometheus exposition).
	// Default nil: no /metrics route.
	Metrics http.Handler
	// MetricsPublic serves /metrics without the API's access rule (for a
	// scraper that cannot send a bearer token, on a network where the
	// metrics may be read). Default false: /metrics needs an admin's API
	// key, or a loopback peer when there are none, like /v1.
	MetricsPublic bool
	// AllowedHosts are further names the Host header may give for this
	// server, "name" (any port) or "name:port": a DNS name, or the name a
	// reverse proxy forwards. The server's own address (and localhost on a
	// loopback listener) is always allowed. The Host rule applies to a
	// server without API keys, and to one with keys when this is not
	// empty (see origin.go). Default: none.
	AllowedHosts []string
	// StreamWriteTimeout bounds each write of an event stream (a batch of
	// events, or a ping): a stream is exempt from http.Server's
	// WriteTimeout, since it lasts as long as its client, but a client that
	// stops reading would otherwise hold it (and its connection) for ever.
	// A write gets at least all but a 64th of it (the deadline moves once
	// per 64th, not at every write: deadline.go). Default 1 minute.
	StreamWriteTimeout time.Duration
	// TrustedOrigins are browser origins ("https://longhaul.example.com")
	// allowed to send state-changing requests besides the Host's own: the
	// public URL of a server behind a proxy that rewrites Host. Default:
	// none.
	TrustedOrigins []string
	// TrustedProxyHeader names the request header in which a reverse proxy
	// that signed the user in (oauth2-proxy and the like) says who they
	// are, e.g. "X-Forwarded-User": single sign-on without Longhaul doing
	// OAuth. It is believed only from a TCP peer in TrustedProxies, and
	// names one of ProxyUsers (an unknown user is a 403); from any other
	// peer it is ignored. Default "": no single sign-on. See sso.go.
	TrustedProxyHeader string
	// TrustedProxies are the networks the proxies connect from (the TCP
	// peer's address, never a forwarded one). Required with
	// TrustedProxyHeader, and only with it.
	TrustedProxies []netip.Prefix
	// ProxyUsers are the identities TrustedProxyHeader may name, each
	// checked by app.ProxyUser.Check (names unique regardless of case).
	// Required with TrustedProxyHeader, and only with it.
	ProxyUsers []app.ProxyUser
	// MaxFileBytes bounds the body of a file upload (PUT
	// /v1/sessions/{id}/files/{path}); a larger one is a 413. Default
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// Audit, when set, records the audit log's entries (audit.go): every
	// state-changing request and every refused one. Default nil: none are
	// stored.
	Audit AuditRecorder
	// AuditLog, when set, receives each audit entry as one line at info
	// level (serve gives it a JSON handler on its log output). Default
	// nil: none are logged.
	AuditLog *slog.Logger
	// RateLimits limits each caller's requests per route class
	// (ratelimit.go; ParseRateLimits reads serve's --rate-limit). Default
	// nil: no limits.
	RateLimits RateLimits
	// MaxLimiters bounds the rate limits' buckets in memory (one per
	// caller and class). Default DefaultMaxLimiters.
	MaxLimiters int
	// Runners, when set, serves the runners' connections (GET
	// /v1/runners/connect, runners.go). Default nil: the route answers
	// 503.
	Runners RunnerHub
}

// Defaults.
const (
	DefaultMaxBodyBytes       = 1 << 20
	DefaultPingInterval       = 15 * time.Second
	DefaultStreamWriteTimeout = time.Minute
	// DefaultIdempotencyClaimTTL: a retry after a node's death waits this
	// long, answered 409, before it runs again.
	DefaultIdempotencyClaimTTL = 30 * time.Second
)

// Validate reports the first invalid field of c, naming it. A nil Config is
// valid.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	for i, k := range c.APIKeys {
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("server config: APIKeys[%d] is empty", i)
		}
		if strings.ContainsAny(k, " \t\r\n") {
			return fmt.Errorf("server config: APIKeys[%d] contains whitespace", i)
		}
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("server config: MaxBodyBytes is negative (%d)", c.MaxBodyBytes)
	}
	if c.PingInterval < 0 {
		return fmt.Errorf("server config: PingInterval is negative (%s)", c.PingInterval)
	}
	if c.MaxFileBytes < 0 {
		return fmt.Errorf("server config: MaxFileBytes is negative (%d)", c.MaxFileBytes)
	}
	if c.IdempotencyClaimTTL < 0 {
		return fmt.Errorf("server config: IdempotencyClaimTTL is negative (%s)", c.IdempotencyClaimTTL)
	}
	if c.StreamWriteTimeout < 0 {
		return fmt.Errorf("server config: StreamWriteTimeout is negative (%s)", c.StreamWriteTimeout)
	}
	for i, h := range c.AllowedHosts {
		if err := validateAllowedHost(h); err != nil {
			return fmt.Errorf("server config: AllowedHosts[%d]: %w", i, err)
		}
	}
	for class, r := range c.RateLimits {
		if !slices.Contains(RouteClasses(), class) {
			return fmt.Errorf("server config: RateLimits: unknown class %q (want one of %s)", class, strings.Join(RouteClasses(), ", "))
		}
		if r.Limit <= 0 || r.Burst < 1 {
			return fmt.Errorf("server config: RateLimits[%s]: the limit must be positive and the burst at least 1", class)
		}
	}
	if c.MaxLimiters < 0 {
		return fmt.Errorf("server config: MaxLimiters is negative (%d)", c.MaxLimiters)
	}
	for i, o := range c.TrustedOrigins {
		if err := validateTrustedOrigin(o); err != nil {
			return fmt.Errorf("server config: TrustedOrigins[%d]: %w", i, err)
		}
	}
	if err := c.validateProxy(); err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	return nil
}

// withDefaults returns a copy of c with every zero field set to its default.
func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
		out.APIKeys = append([]string(nil), c.APIKeys...)
		out.AllowedHosts = append([]string(nil), c.AllowedHosts...)
		out.TrustedOrigins = append([]string(nil), c.TrustedOrigins...)
		out.TrustedProxies = append([]netip.Prefix(nil), c.TrustedProxies...)
		out.ProxyUsers = append([]app.ProxyUser(nil), c.ProxyUsers...)
	}
	if out.MaxBodyBytes == 0 {
		out.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if out.MaxFileBytes == 0 {
		out.MaxFileBytes = DefaultMaxFileBytes
	}
	if out.PingInterval == 0 {
		out.PingInterval = DefaultPingInterval
	}
	if out.StreamWriteTimeout == 0 {
		out.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.IdempotencyClaimTTL == 0 {
		out.IdempotencyClaimTTL = DefaultIdempotencyClaimTTL
	}
	return out
}

// Server is the HTTP API. It is an http.Handler; mount it at the root.
type Server struct {
	b    Backend
	idem IdempotencyStore
	cfg  Config
	log  *slog.Logger
	mux  *http.ServeMux
	// routeList is every endpoint handle registered (Routes).
	routeList []Route
	// frames shares the encoded frames of session streams (sseframes.go).
	frames frameCache
	keys   [][32]byte // SHA-256 of each API key, so comparisons take equal time
	// hosts and crossOrigin refuse requests a web page made the browser
	// send (origin.go).
	hosts       hostRule
	crossOrigin *http.CrossOriginProtection
	// proxyUsers maps the lower-cased name of each of Config.ProxyUsers to
	// who it calls as (sso.go).
	proxyUsers map[string]app.Caller

	// base ends when Shutdown is called; event streams watch it.
	base     context.Context
	shutdown context.CancelCauseFunc

	// newTicker makes the ping ticker of an event stream; tests replace it
	// to send pings on demand instead of waiting for PingInterval.
	newTicker func(d time.Duration) (tick <-chan time.Time, stop func())

	// idemLocks serializes requests that share an idempotency scope and key.
	idemLocks keyedMutex

	// limits holds the rate limits' buckets (nil: no limits).
	limits *limiters
	// matcher routes a request again to learn its route and path values
	// for the audit log, whether or not it reached mux; targetNames says
	// what each route's wildcards name (audit.go).
	matcher     *http.ServeMux
	targetNames map[string][]auditTarget
}

// errShuttingDown is the cause of the base context after Shutdown.
var errShuttingDown = errors.New("server is shutting down")

// New returns a Server serving b, keeping idempotency records in idem. cfg
// may be nil (defaults). It panics if b or idem is nil or cfg is invalid
// (see Config.Validate): those are wiring mistakes, not runtime conditions.
func New(b Backend, idem IdempotencyStore, cfg *Config) *Server {
	if b == nil {
		panic("server: nil Backend")
	}
	if idem == nil {
		panic("server: nil IdempotencyStore")
	}
	if err := cfg.Validate(); err != nil {
		panic(err.Error())
	}
	c := cfg.withDefaults()
	s := &Server{
		b:         b,
		idem:      idem,
		cfg:       c,
		log:       c.Logger,
		mux:       http.NewServeMux(),
		newTicker: realTicker,
		idemLocks: keyedMutex{m: make(map[string]*keyedLock)},

		limits:      newLimiters(c.RateLimits, c.MaxLimiters),
		matcher:     http.NewServeMux(),
		targetNames: map[string][]auditTarget{},
	}
	s.keys = hashKeys(c.APIKeys)
	s.hosts = newHostRule(c.AllowedHosts)
	s.crossOrigin = newCrossOrigin(c.TrustedOrigins)
	s.proxyUsers = proxyCallers(c.ProxyUsers)
	s.base, s.shutdown = context.WithCancelCause(context.Background())
	s.routes()
	return s
}

// routes registers every endpoint. Patterns are Go 1.22 ServeMux patterns;
// GET patterns answer HEAD too.
func (s *Server) routes() {
	s.handle("GET /healthz", "", s.healthz)
	s.handle("GET /readyz", "", s.readyz)

	s.handle("POST /v1/sessions", "CreateSession", s.idempotent(s.createSession))
	s.handle("GET /v1/sessions", "ListSessions", s.listSessions)
	s.handle("GET /v1/sessions/{id}", "GetSession", s.getSession)
	s.handle("POST /v1/sessions/{id}/turns", "CreateTurn", s.idempotent(s.createTurn))
	s.handle("GET /v1/sessions/{id}/turns", "ListTurns", s.listTurns)
	s.handle("GET /v1/sessions/{id}/turns/{turn_id}", "GetTurn", s.getTurn)
	s.handle("POST /v1/sessions/{id}/cancel", "Cancel", s.idempotent(s.cancelSession))
	s.handle("POST /v1/sessions/{id}/constraints", "AddConstraint", s.idempotent(s.addConstraint))
	s.handle("POST /v1/sessions/{id}/review", "Review", s.idempotent(s.reviewSession))
	s.handle("POST /v1/sessions/{id}/fork", "Fork", s.idempotent(s.forkSession))
	s.handle("POST /v1/sessions/{id}/signals", "SendSignal", s.idempotent(s.sendSignal))
	s.handle("PATCH /v1/sessions/{id}/budget", "UpdateBudget", s.updateBudget)
	s.handle("GET /v1/sessions/{id}/events", "ListEvents", s.listEvents)
	s.handle("GET /v1/sessions/{id}/events/stream", "StreamEvents", s.streamEvents)
	s.handle("GET /v1/sessions/{id}/actions", "ListActions", s.listActions)
	s.handle("POST /v1/sessions/{id}/actions/{action_id}", "DecideAction", s.idempotent(s.decideAction))
	s.handle("GET /v1/sessions/{id}/effects", "ListEffects", s.listEffects)
	s.handle("GET /v1/sessions/{id}/effects/{effect_id}", "GetEffect", s.getEffect)
	s.handle("GET /v1/sessions/{id}/checkpoints", "ListCheckpoints", s.listCheckpoints)
	s.handle("GET /v1/sessions/{id}/artifacts", "ListArtifacts", s.listArtifacts)
	s.handle("GET /v1/sessions/{id}/trace", "SessionTrace", s.sessionTrace)

	// Control of a running session: steer.go, pause.go.
	s.handle("POST /v1/sessions/{id}/steer", "Steer", s.idempotent(s.steerSession))
	s.handle("POST /v1/sessions/{id}/pause", "Pause", s.idempotent(s.pauseSession))
	s.handle("POST /v1/sessions/{id}/resume", "Resume", s.idempotent(s.resumeSession))

	s.handle("GET /v1/actions", "ListAllActions", s.listAllActions)
	s.handle("GET /v1/actions/{action_id}", "GetAction", s.getAction)

	s.handle("GET /v1/artifacts/{id}", "GetArtifact", s.getArtifact)
	s.handle("GET /v1/artifacts/{id}/content", "ArtifactContent", s.artifactContent)
	s.handle("GET /v1/blobs/{sha256}", "GetBlob", s.getBlob)

	s.handle("PUT /v1/secrets/{name}", "PutSecret", s.putSecret)
	s.handle("GET /v1/secrets", "ListSecrets", s.listSecrets)
	s.handle("DELETE /v1/secrets/{name}", "DeleteSecret", s.deleteSecret)

	s.handle("GET /v1/me", "Me", s.me)
	s.handle("GET /v1/version", "Version", s.version)
	s.handle("POST /v1/keys", "CreateKey", s.createKey)
	s.handle("GET /v1/keys", "ListKeys", s.listKeys)
	s.handle("DELETE /v1/keys/{id}", "RevokeKey", s.revokeKey)

	s.handle("GET /v1/audit", "ListAudit", s.listAudit)

	s.handle("POST /v1/webhooks/endpoints", "CreateWebhookEndpoint", s.idempotent(s.createWebhookEndpoint))
	s.handle("GET /v1/webhooks/endpoints", "ListWebhookEndpoints", s.listWebhookEndpoints)
	s.handle("DELETE /v1/webhooks/endpoints/{id}", "DeleteWebhookEndpoint", s.deleteWebhookEndpoint)
	s.handle("GET /v1/webhooks/deliveries", "ListWebhookDeliveries", s.listWebhookDeliveries)

	s.handle("GET /v1/reports/tasks", "TaskReport", s.taskReport)

	// Runners (self-managed environments): runners.go.
	s.handle("GET /v1/runners", "ListRunners", s.listRunners)
	s.handleRoles(runnerConnectPattern, runnerRoles, s.connectRunner)
	s.handle("GET /v1/openapi.json", "", s.openAPI)
	if s.cfg.Metrics != nil {
		s.handle("GET /metrics", "", s.metrics)
	}

	s.handle("POST /v1/agents", "PutAgent", s.idempotent(s.putAgent))
	s.handle("GET /v1/agents", "ListAgents", s.listAgents)
	s.handle("GET /v1/agents/{name}", "GetAgent", s.getAgent)
	s.handle("GET /v1/agents/{name}/versions", "ListAgentVersions", s.listAgentVersions)

	s.fileRoutes()

	// The web UI: the page at / and its assets under /ui/. They hold no
	// data (every piece comes from /v1, under the access rule above), so
	// they are served to anyone, with their own CSP and cache headers.
	ui := webui.New()
	s.mux.Handle("GET /{$}", ui)
	s.mux.Handle("GET "+webui.AssetPrefix, ui)
}

// handlerFunc is an endpoint: it writes a response, or returns an error that
// writeError turns into one.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Route is one endpoint: its ServeMux pattern and the Service method whose
// entry in app.Permissions says who may call it ("" for the open probes,
// for /metrics, which has its own rule, and for a route with Roles).
type Route struct {
	Pattern string
	Method  string
	// Roles, for a /v1 route that calls no Service method (a runner's
	// connection), are the roles that may use it.
	Roles []lt.Role
}

// Routes lists every endpoint, in the order they were registered (the
// route × role test derives its cases from it).
func (s *Server) Routes() []Route { return slices.Clone(s.routeList) }

// handle registers an endpoint. A /v1 route names the Service method it
// calls, and its caller's role is checked against app.Permissions before
// the handler decodes anything; registering one without a known method is
// a wiring mistake (a panic at start-up, caught by every test). The one
// /v1 route without a method is openAPIPattern: it calls no use case, and
// ServeHTTP's access rule (a key, or a loopback peer) is all it needs.
func (s *Server) handle(pattern, method string, h handlerFunc) {
	_, p, _ := strings.Cut(pattern, " ")
	if _, ok := app.Permissions[method]; (method != "" || (isAPIPath(p) && pattern != openAPIPattern)) && !ok {
		panic(fmt.Sprintf("server: route %q names no method of app.Permissions (%q)", pattern, method))
	}
	s.routeList = append(s.routeList, Route{Pattern: pattern, Method: method})
	s.matcher.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	s.targetNames[pattern] = patternTargets(pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if method != "" {
			if err := app.Allow(r.Context(), method); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// handleRoles registers a /v1 endpoint that calls no Service method but
// has its own rule of who may use it: the caller's role must be one of
// roles (a 403 naming it otherwise), checked before the handler runs.
func (s *Server) handleRoles(pattern string, roles []lt.Role, h handlerFunc) {
	s.routeList = append(s.routeList, Route{Pattern: pattern, Roles: slices.Clone(roles)})
	s.matcher.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	s.targetNames[pattern] = patternTargets(pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, _ := app.CallerFrom(r.Context())
		if !slices.Contains(roles, c.Role) {
			names := make([]string, len(roles))
			for i, role := range roles {
				names[i] = string(role)
			}
			s.writeError(w, r, apierror.Forbidden("the %s role may not use %s (it needs one of: %s)",
				app.RoleOrNone(c.Role), pattern, strings.Join(names, ", ")))
			return
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// Shutdown ends every open event stream and makes new streams and /readyz
// answer 503, so that http.Server.Shutdown (which waits for active requests)
// is not held open by streaming clients. Register it with
// http.Server.RegisterOnShutdown. It returns at once and is safe to call more
// than once.
func (s *Server) Shutdown() {
	s.shutdown(errShuttingDown)
}

type ctxKey int

const requestIDKey ctxKey = iota

// requestID returns the id ServeHTTP gave r (it is also the X-Request-Id
// response header), so a 500's log line can be found from the response.
func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// ServeHTTP authenticates /v1/ requests and refuses those a web page made a
// browser send (origin.go), routes, answers unrouted requests
// with 404/405 in the API error shape, and recovers handler panics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	rid := newRequestID()
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey, rid))
	rw := &responseWriter{ResponseWriter: w}
	rw.Header().Set("X-Request-Id", rid)
	rw.Header().Set("X-Content-Type-Options", "nosniff")

	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler { // net/http's way to abort a response: let it through
				panic(p)
			}
			s.log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "request_id", rid,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if !rw.wroteHeader {
				// Written directly: writeError would log the panic a second time.
				_ = writeJSON(rw, http.StatusInternalServerError, internalBody())
			}
		}
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rw.statusCode(),
			"duration", s.cfg.Now().Sub(start), "request_id", rid)
		s.audit(r, rw.statusCode())
	}()

	if r.Body != nil {
		// The unwrapped writer: net/http then also closes the connection
		// after a 413, rather than reading the rest of a huge body.
		r.Body = http.MaxBytesReader(w, r.Body, s.bodyLimit(r))
	}
	if isAPIPath(r.URL.Path) {
		c, err := s.guard(rw, r)
		if err != nil {
			if c.Role != "" {
				// Authenticated, refused by the Host or cross-site rule:
				// for the audit log only, which names who it refused.
				r = r.WithContext(app.WithCaller(r.Context(), c))
			} else {
				err = s.limitRefused(rw, r, err)
			}
			s.writeError(rw, r, err)
			return
		}
		// Every use case reads who calls from the context (app.CallerFrom).
		r = r.WithContext(app.WithCaller(r.Context(), c))
		if c.Role == lt.RoleRunner {
			// A runner's key, on a machine the server trusts less than
			// itself, opens its connection and nothing else: not the
			// routes without a Service method either (/v1/openapi.json),
			// nor an unrouted path (a 403, not a 404 that maps the API).
			if _, pattern := s.mux.Handler(r); pattern != runnerConnectPattern {
				s.writeError(rw, r, runnerKeyElsewhere())
				return
			}
		}
		if err := s.limitCaller(rw, r, c); err != nil {
			s.writeError(rw, r, err)
			return
		}
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.writeError(rw, r, s.unrouted(rw, r))
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// isAPIPath reports whether p (cleaned, as the router will see it) is under
// /v1, where access control applies.
func isAPIPath(p string) bool {
	p = path.Clean("/" + p)
	return p == "/v1" || strings.HasPrefix(p, "/v1/")
}

// responseWriter records whether and with what status the header was
// written (for the recovery path and the access log). Unwrap lets
// http.ResponseController reach the connection's Flush and deadlines.
type responseWriter struct {
	http.ResponseWriter
	wroteHeader bool
	status      int
}

func (w *responseWriter) WriteHeader(code int) {
	if !w.wroteHeader && code >= 200 {
		w.wroteHeader = true
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *responseWriter) headerWritten() bool { return w.wroteHeader }

func (w *responseWriter) statusCode() int {
	if !w.wroteHeader {
		return http.StatusOK
	}
	return w.status
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}
