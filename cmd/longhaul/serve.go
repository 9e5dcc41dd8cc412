package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/freespace"
	lhnode "github.com/longhaul-dev/longhaul/internal/node"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/vault"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Defaults of `serve`.
const (
	defaultAddr    = "127.0.0.1:8080"
	defaultDataDir = "longhaul-data"
	// defaultLeaseTTL is the engine's default; minLeaseTTL keeps renewals
	// (every third of it) well apart from a slow store's round trip.
	defaultLeaseTTL = 30 * time.Second
	minLeaseTTL     = time.Second
)

type serveOpts struct {
	addr     string
	dataDir  string
	storeURL string
	// noMigrate refuses a schema older than the binary instead of
	// migrating it.
	noMigrate bool
	// leaseTTL is how long a node's lease on a session lasts unrenewed.
	leaseTTL time.Duration
	// relaxAfterAsks is how many asks, all approved, flag a policy rule
	// as a candidate to relax in task reports.
	relaxAfterAsks int
	// runnerCheck is how often a runner's key is checked again.
	runnerCheck time.Duration
	// runnerMaxConnsPerKey and runnerMaxConns cap the runner connections
	// to this node, per key and all together.
	runnerMaxConnsPerKey, runnerMaxConns int
	config                               string
	apiKeys                              []string
	logLevel                             string
	// logFormat is text or json: how log lines are written.
	logFormat string
	ping      time.Duration
	vaultKey  string
	sandbox   string
	// sandboxDiskMB is the default workspace quota.
	sandboxDiskMB int
	// browserMemoryMB bounds each session's browser.
	browserMemoryMB int
	// sandboxUser is UID[:GID], the host identity of a root server's
	// sandboxes.
	sandboxUser string
	// webhookAllowPrivate lists private addresses webhooks may reach.
	webhookAllowPrivate []string
	// sandboxROPaths are host directories every sandbox sees read-only.
	sandboxROPaths []string
	// otlpEndpoint is where turn traces are exported ("": per OTEL_*).
	otlpEndpoint string
	// webhookAllowPorts are ports webhooks may reach besides 80 and 443.
	webhookAllowPorts []int
	// metricsPublic serves /metrics without an API key.
	metricsPublic bool
	// modelKeyEnv are NAME=HOST[,HOST] entries: environment variables
	// agents may name as a model's api_key_env, and where each key may go.
	modelKeyEnv []string
	// controlPlaneAddrs are other addresses of this deployment's control
	// plane (a load balancer) that sessions may never reach.
	controlPlaneAddrs []string
	// allowedHosts are names the Host header may give besides the listen
	// address; publicURLs are the server's public URLs (their hosts are
	// allowed, their origins trusted).
	allowedHosts []string
	publicURLs   []string
	// http bounds what one client can hold (timeouts, connections per IP).
	http lhnode.HTTPLimits
	// auditRetention is how long the audit log keeps an entry (0: for
	// ever).
	auditRetention time.Duration
	// idempotencyRetention is how long the response to a request with an
	// Idempotency-Key answers its repeats (0: for ever).
	idempotencyRetention time.Duration
	// rateLimit is the per-key rate limits' spec ("": none).
	rateLimit string
	// trustedProxyHeader names the header a trusted reverse proxy names
	// the signed-in user in; trustedProxies are the networks it connects
	// from (single sign-on: internal/server/sso.go).
	trustedProxyHeader string
	trustedProxies     []string
	// minFreeMB is the free-space floor of the data volume, in MiB (0:
	// none).
	minFreeMB int64
}

func (c *cli) serveCmd() *cobra.Command {
	o := &serveOpts{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Longhaul server (HTTP API and workers, on SQLite or PostgreSQL)",
		Long: `Run the Longhaul server: the HTTP API and the workers that run sessions, with
an embedded SQLite database in the data directory (DATA/longhaul.db, session
workspaces in DATA/workspaces, this node's id in DATA/node-id).

With --store postgres://... (or LONGHAUL_STORE) the sessions live in
PostgreSQL instead, and several nodes, each with a data directory of its own
(workspaces, node id, vault key), serve the same deployment: every node
serves the API and runs workers. The tables live in the first schema of the
URL's search_path. The URL's password is never printed; PGPASSWORD or
~/.pgpass keep it out of the command line.

At start the node migrates the database to this binary's schema; with
--no-migrate it refuses to start on an older schema instead (run "longhaul
migrate" first). It always refuses a schema newer than itself.

Agents listed in the config file are registered at start, each only when its
spec differs from the latest stored version:

  agents:
    - name: researcher
      spec:
        model: {provider: scripted, script: [{text: "Hello"}]}
        instructions: Be brief.
        tools: [{name: shell}, {name: write_file}]
  model_key_env:              # as --model-key-env, see below
    LOCAL_MODEL_KEY: ["localhost:11434"]

A model's key goes only where it is bound: api_key_secret only to the
secret's hosts, and api_key_env only names variables allowed for model keys,
OPENAI_API_KEY (for api.openai.com) and ANTHROPIC_API_KEY (for
api.anthropic.com) by default, more with --model-key-env NAME=HOST[,HOST].
Sessions never reach the server's control plane, whatever an agent lists:
this node's --addr, the database of --store, and --control-plane-addr.

Without API keys the server accepts requests from loopback addresses only.
GET /metrics serves Prometheus metrics under the same rule (with keys, an
admin key: the metrics span every project), unless --metrics-public opens
it to any scraper.

Web pages cannot drive the API: without API keys a request's Host header
must name this server (its listen address, or localhost on a loopback
one; add names with --allowed-host or --public-url, which a server with
keys then checks too), and in every mode a state-changing request from
another origin, or with a body that is not application/json, is refused
(403).

Slow or greedy clients are bounded: a request must arrive within
--read-header-timeout (header) and --read-timeout (header and body), a
response is written within --write-timeout (event streams excepted), an
idle keep-alive connection closes after --idle-timeout, and one IP address
holds at most --max-conns-per-ip connections (more get a 429). 0 turns a
limit off.

Every state-changing request and every refused one (401, 403, 429) is an
entry of the audit log (GET /v1/audit, 'longhaul audit'), also written to
this log as a JSON line (msg "audit"); entries older than --audit-retention
are deleted. --rate-limit limits each key's requests per route class.
The first response to a request with an Idempotency-Key answers its repeats
for --idempotency-retention; a repeat after that runs as a new request.

Single sign-on: behind a reverse proxy that signs users in with your
identity provider (oauth2-proxy and the like) and names the user in a
header, --trusted-proxy-header X-Forwarded-User with --trusted-proxy CIDR
makes a request from that proxy the user it names, with the role and project
the config file gives the user (a user it does not list gets a 403):

  users:
    - {name: alice@example.com, role: approver, project: default}
    - {name: bob@example.com, role: admin}     # every project

The header is believed only from a TCP peer inside a --trusted-proxy network
and ignored from any other; the proxy must strip it from what clients send.
A request with "Authorization: Bearer <key>" is that key, proxy or not.

SIGINT or SIGTERM drains it: it stops accepting requests, lets running steps
finish (or leaves them resumable) and exits 0.`,
		Example: `  longhaul serve
  longhaul serve --store 'postgres://longhaul@db:5432/longhaul?search_path=longhaul' --data /var/lib/longhaul --no-migrate
  longhaul serve --addr 0.0.0.0:8080 --data /var/lib/longhaul --api-key "$KEY"
  LONGHAUL_API_KEYS=key1,key2 longhaul serve --config agents.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.serve(cmd, o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.addr, "addr", defaultAddr, "address to listen on, HOST:PORT (env LONGHAUL_ADDR)")
	fs.StringVar(&o.dataDir, "data", defaultDataDir, "data directory: SQLite database, workspaces, node id, vault key (env LONGHAUL_DATA)")
	fs.StringVar(&o.storeURL, "store", "", storeFlagUsage)
	fs.DurationVar(&o.runnerCheck, "runner-check-interval", 5*time.Second, "how often a connected runner's key is read again (a revoked key's runner is disconnected at the next check) and its liveness recorded; a runner of a node that died leaves the list after three")
	fs.IntVar(&o.runnerMaxConnsPerKey, "runner-max-conns-per-key", lhnode.DefaultRunnerMaxConnsPerKey, "runner connections one runner key may hold to this node at once (a few runners sharing a key, or one reconnecting before its old connection was noticed dead); one more is refused with close code 4007")
	fs.IntVar(&o.runnerMaxConns, "runner-max-conns", lhnode.DefaultRunnerMaxConns, "runner connections this node holds at once, every key together; one more is refused with close code 4007")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", defaultLeaseTTL, "how long a node's lease on a running session lasts without renewal (renewed every third of it): how soon the other nodes take over the sessions of a node that died")
	fs.IntVar(&o.relaxAfterAsks, "relax-after-asks", lt.DefaultRelaxAfterAsks, "task reports flag a policy rule approved every time over at least this many asks as a candidate to relax")
	fs.BoolVar(&o.noMigrate, "no-migrate", false, "do not migrate the database at start: refuse a schema older than this binary (run 'longhaul migrate' apart, e.g. during an upgrade)")
	fs.StringVar(&o.config, "config", "", "config file with agents to register and users for single sign-on (env LONGHAUL_CONFIG; default "+defaultConfigFile+" if it exists)")
	fs.StringArrayVar(&o.apiKeys, "api-key", nil, "bootstrap API key, an admin accepted as a bearer token (more keys: longhaul keys create); repeat for several (env LONGHAUL_API_KEYS, comma-separated)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error (env LONGHAUL_LOG_LEVEL)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log line format on stderr: text (key=value) or json (one JSON object a line, for a log shipper) (env LONGHAUL_LOG_FORMAT)")
	fs.DurationVar(&o.ping, "ping-interval", 15*time.Second, "how often an idle event stream gets a \": ping\" comment")
	fs.StringVar(&o.sandbox, "sandbox", "auto", "where shell commands run: auto (bwrap when it works, else local with a warning), bwrap (refuse to start without it) or local (no isolation: development only)")
	fs.StringVar(&o.sandboxUser, "sandbox-user", fmt.Sprintf("%d:%d", sandbox.DefaultUID, sandbox.DefaultGID), "UID[:GID]: the unprivileged host user (and group) a server running as root runs its bwrap sandboxes as; numbers, never 0. A uid no other program uses is best")
	fs.IntVar(&o.sandboxDiskMB, "sandbox-disk-mb", sandbox.DefaultDiskBytes>>20, "disk quota of each session's workspace, in MiB, for agents that set no environment.disk_mb: a shell command that leaves the workspace above it fails with a tool error")
	fs.IntVar(&o.browserMemoryMB, "browser-memory-mb", engine.DefaultBrowserMemory>>20, "memory each session's browser (the browser tool's Chromium) may use, in MiB, all its processes together: a memory cgroup where the server can make one, and V8's heap limit (half of it) always")
	fs.StringArrayVar(&o.sandboxROPaths, "sandbox-ro-path", nil, "a host directory every bwrap sandbox sees read-only at the same path, e.g. where an MCP server was installed (npm install --prefix /opt/mcp ...); never the data directory, /etc or the sandbox's own mount points. Repeat for several (also sandbox_ro_paths in the config file)")
	fs.StringVar(&o.vaultKey, "vault-key-file", "", "the vault's key file (default DATA/vault.key, created on first use; env LONGHAUL_VAULT_KEY gives the key itself, base64): back it up, apart from the database")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "export each turn as an OpenTelemetry trace to this OTLP collector URL, e.g. http://localhost:4318 (default: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT when set, else no export)")
	fs.StringArrayVar(&o.webhookAllowPrivate, "webhook-allow-private", nil, "IP address that webhooks may reach although it is private, loopback or link-local (e.g. 127.0.0.1 for a local receiver); repeat for several")
	fs.IntSliceVar(&o.webhookAllowPorts, "webhook-allow-port", nil, "destination port that webhooks may reach besides 80 and 443 (e.g. the port of a local receiver); repeat for several")
	fs.StringArrayVar(&o.modelKeyEnv, "model-key-env", nil, "NAME=HOST[,HOST]: allow agents to name the environment variable NAME as a model's api_key_env, its key going only to these hosts (a host may give a port: HOST:PORT); repeat for several. OPENAI_API_KEY=api.openai.com and ANTHROPIC_API_KEY=api.anthropic.com are allowed by default (naming one here replaces its hosts); any other variable is refused, and LONGHAUL_* never allowed")
	fs.StringArrayVar(&o.controlPlaneAddrs, "control-plane-addr", nil, "HOST:PORT of this deployment's control plane that sessions must never reach, besides every node's --addr (each node announces its own in the database) and the database (e.g. a load balancer in front of the nodes); repeat for several")
	fs.StringArrayVar(&o.allowedHosts, "allowed-host", nil, "a name clients reach this server under, NAME or NAME:PORT (a DNS name, or the Host a reverse proxy forwards), allowed in the Host header besides the listen address; repeat for several (env LONGHAUL_ALLOWED_HOSTS, comma-separated)")
	fs.StringArrayVar(&o.publicURLs, "public-url", nil, "a URL browsers and clients reach this server at, e.g. https://longhaul.example.com behind a proxy: its host is allowed in Host and its origin may send state-changing requests; repeat for several (env LONGHAUL_PUBLIC_URL, comma-separated)")
	fs.DurationVar(&o.http.ReadHeaderTimeout, "read-header-timeout", lhnode.DefaultReadHeaderTimeout, "how long a client may take to send a request's header (0: no limit)")
	fs.DurationVar(&o.http.ReadTimeout, "read-timeout", lhnode.DefaultReadTimeout, "how long a client may take to send a whole request, header and body (0: no limit)")
	fs.DurationVar(&o.http.WriteTimeout, "write-timeout", lhnode.DefaultWriteTimeout, "how long a response may take, from the end of its request's header; event streams are exempt (0: no limit)")
	fs.DurationVar(&o.http.IdleTimeout, "idle-timeout", lhnode.DefaultIdleTimeout, "how long an idle keep-alive connection stays open (0: no limit)")
	fs.IntVar(&o.http.MaxConnsPerIP, "max-conns-per-ip", lhnode.DefaultMaxConnsPerIP, "connections one client IP address may hold open at once; more are answered 429 and closed (0: no limit)")
	fs.BoolVar(&o.metricsPublic, "metrics-public", false, "serve GET /metrics to anyone, without an API key (for a Prometheus that scrapes without one, on a network where the metrics may be read: they show agent, tool and model names, volumes and costs)")
	fs.DurationVar(&o.auditRetention, "audit-retention", lhnode.DefaultAuditRetention, "how long the audit log (GET /v1/audit) keeps an entry: older ones are deleted every hour, by every node (0: keep every entry)")
	fs.DurationVar(&o.idempotencyRetention, "idempotency-retention", lhnode.DefaultIdempotencyRetention, "how long the first response to a request with an Idempotency-Key answers its repeats: older ones are deleted every hour, by every node, and a repeat after that runs as a new request (0: keep every response)")
	fs.StringVar(&o.rateLimit, "rate-limit", "", "per-key rate limits, per route class: CLASS=N/UNIT[:BURST],... with CLASS read, write or stream, UNIT s, m or h, BURST default N, e.g. read=100/s,write=20/s:40,stream=10/m; requests without a valid key count per client address; each node limits on its own; over a limit is a 429 with Retry-After (env LONGHAUL_RATE_LIMIT; default: no limits)")
	fs.StringVar(&o.trustedProxyHeader, "trusted-proxy-header", "", "single sign-on: the request header in which a reverse proxy that signed the user in names them, e.g. X-Forwarded-User; believed only from a --trusted-proxy peer, and the name must be one of the config file's users (needs --trusted-proxy)")
	fs.StringArrayVar(&o.trustedProxies, "trusted-proxy", nil, "CIDR (or IP) of a network the --trusted-proxy-header proxy connects from, e.g. 10.0.0.5/32; the TCP peer's address is checked, never a forwarded one; repeat for several")
	fs.Int64Var(&o.minFreeMB, "min-free-mb", freespace.DefaultFloorMiB, "free space (MiB) the data directory's volume must keep: below it the server takes no new work (new sessions and turns are 507, /readyz is 503) until space is freed; 0 turns the floor off")
	return cmd
}

func (c *cli) serve(cmd *cobra.Command, o *serveOpts) error {
	ctx := cmd.Context()
	addr := c.flagOrEnv(cmd, "addr", o.addr, "LONGHAUL_ADDR")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("--addr %q: want HOST:PORT: %v", addr, err)
	}
	dataDir := c.flagOrEnv(cmd, "data", o.dataDir, "LONGHAUL_DATA")
	storeURL := c.flagOrEnv(cmd, "store", o.storeURL, storeEnv)
	if storeURL != "" && !isPostgresURL(storeURL) {
		return usagef("--store (or %s): want a postgres:// or postgresql:// URL (the value is not shown: it may hold a password); leave it empty for SQLite in the data directory", storeEnv)
	}
	if o.runnerCheck < 100*time.Millisecond {
		return usagef("--runner-check-interval %s: want at least 100ms", o.runnerCheck)
	}
	if o.runnerMaxConnsPerKey < 1 {
		return usagef("--runner-max-conns-per-key %d: want at least 1", o.runnerMaxConnsPerKey)
	}
	if o.runnerMaxConns < 1 {
		return usagef("--runner-max-conns %d: want at least 1", o.runnerMaxConns)
	}
	if o.relaxAfterAsks < 1 {
		return usagef("--relax-after-asks %d: want at least 1", o.relaxAfterAsks)
	}
	if o.leaseTTL < minLeaseTTL {
		return usagef("--lease-ttl %s: want at least %s", o.leaseTTL, minLeaseTTL)
	}
	level, err := parseLogLevel(c.flagOrEnv(cmd, "log-level", o.logLevel, "LONGHAUL_LOG_LEVEL"))
	if err != nil {
		return err
	}
	logFormat := c.flagOrEnv(cmd, "log-format", o.logFormat, "LONGHAUL_LOG_FORMAT")
	if logFormat != "text" && logFormat != "json" {
		return usagef("--log-format %q: want text or json", logFormat)
	}
	keys := o.apiKeys
	if !cmd.Flags().Changed("api-key") {
		keys = splitList(c.getenv("LONGHAUL_API_KEYS"))
	}
	for i, k := range keys {
		if k == "" || strings.ContainsAny(k, " \t\r\n") {
			return usagef("API key %d is empty or contains whitespace", i+1)
		}
	}
	for _, p := range o.webhookAllowPorts {
		if p < 1 || p > 65535 {
			return usagef("--webhook-allow-port %d: want a port number (1-65535)", p)
		}
	}
	allowedHosts, trustedOrigins, err := c.serveHosts(cmd, o)
	if err != nil {
		return err
	}
	limits, err := httpLimits(o.http)
	if err != nil {
		return err
	}
	sbUID, sbGID, err := parseSandboxUser(o.sandboxUser)
	if err != nil {
		return err
	}
	if o.browserMemoryMB < 256 {
		return usagef("--browser-memory-mb %d: must be at least 256 (Chromium does not start in less)", o.browserMemoryMB)
	}
	if o.sandboxDiskMB < 1 {
		return usagef("--sandbox-disk-mb %d: must be at least 1", o.sandboxDiskMB)
	}
	if o.auditRetention < 0 {
		return usagef("--audit-retention %s: want a duration of 0 (keep every entry) or more", o.auditRetention)
	}
	auditRetention := o.auditRetention
	if auditRetention == 0 {
		auditRetention = -1 // keep every entry
	}
	if o.idempotencyRetention < 0 {
		return usagef("--idempotency-retention %s: want a duration of 0 (keep every response) or more", o.idempotencyRetention)
	}
	if o.idempotencyRetention > 0 && o.idempotencyRetention < lhnode.MinIdempotencyRetention {
		// A client's retries, and a claim's lapse, take minutes.
		return usagef("--idempotency-retention %s: want 0 (keep every response) or at least %s", o.idempotencyRetention, lhnode.MinIdempotencyRetention)
	}
	idempotencyRetention := o.idempotencyRetention
	if idempotencyRetention == 0 {
		idempotencyRetention = -1 // keep every response
	}
	rateLimit := c.flagOrEnv(cmd, "rate-limit", o.rateLimit, "LONGHAUL_RATE_LIMIT")
	if err := lhnode.ValidRateLimit(rateLimit); err != nil {
		return usagef("--rate-limit %q: %v", rateLimit, err)
	}
	if o.minFreeMB < 0 {
		return usagef("--min-free-mb %d: want 0 or more", o.minFreeMB)
	}
	minFree := o.minFreeMB
	if minFree == 0 {
		minFree = -1 // no floor
	}
	switch o.sandbox {
	case "auto", "bwrap", "local":
	default:
		return usagef("--sandbox %q: want auto, bwrap or local", o.sandbox)
	}
	cf, err := c.serverConfig(cmd, o)
	if err != nil {
		return err
	}
	sso, err := singleSignOn(o, cf)
	if err != nil {
		return err
	}
	keyEnv, err := modelKeyEnv(cf, o.modelKeyEnv)
	if err != nil {
		return err
	}
	for _, a := range o.controlPlaneAddrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return usagef("--control-plane-addr %q: want HOST:PORT: %v", a, err)
		}
	}
	otlp, err := c.otlpFromEnv(o.otlpEndpoint)
	if err != nil {
		return err
	}

	// Logs never carry a secret's value: they go through the redactor of
	// the vault's secrets, kept current by the node.
	red := &atomic.Pointer[redact.Redactor]{}
	logOut := redact.NewWriter(c.stderr, red.Load)
	defer logOut.Flush()
	logOpts := &slog.HandlerOptions{Level: level}
	var logHandler slog.Handler = slog.NewTextHandler(logOut, logOpts)
	if logFormat == "json" {
		logHandler = slog.NewJSONHandler(logOut, logOpts)
	}
	log := slog.New(logHandler)
	// The audit log's entries are JSON lines among the others (msg
	// "audit"), whatever the level, for a log shipper to pick out.
	auditLog := slog.New(slog.NewJSONHandler(logOut, nil))
	// Said before the node starts: the node unsets the key's variable, so
	// that no child process inherits it.
	keyFromEnv := c.getenv(vault.KeyEnv) != ""
	n, err := startNode(ctx, nodeConfig{
		redactor: red,
		addr:     addr, dataDir: dataDir, storeURL: storeURL, noMigrate: o.noMigrate, leaseTTL: o.leaseTTL, relaxAfterAsks: o.relaxAfterAsks, runnerCheck: o.runnerCheck,
		runnerMaxConnsPerKey: o.runnerMaxConnsPerKey, runnerMaxConns: o.runnerMaxConns, apiKeys: keys, pingInterval: o.ping, config: cf, logger: log,
		vaultKeyFile: o.vaultKey, vaultKeyEnv: c.getenv(vault.KeyEnv), sandbox: o.sandbox, sandboxDiskMB: o.sandboxDiskMB, browserMemoryMB: o.browserMemoryMB, sandboxROPaths: sandboxROPaths(cf, o.sandboxROPaths), sandboxUID: sbUID, sandboxGID: sbGID, otlp: otlp,
		webhookAllowPrivate: o.webhookAllowPrivate, webhookAllowPorts: o.webhookAllowPorts,
		metricsPublic: o.metricsPublic, modelKeyEnv: keyEnv, controlPlaneAddrs: o.controlPlaneAddrs,
		allowedHosts: allowedHosts, trustedOrigins: trustedOrigins, httpLimits: limits, minFreeMiB: minFree,
		auditRetention: auditRetention, idempotencyRetention: idempotencyRetention, auditLog: auditLog, rateLimit: rateLimit, sso: sso,
	})
	if err != nil {
		return err
	}
	vaultKey := "key from " + vault.KeyEnv
	if !keyFromEnv {
		vaultKey = o.vaultKey
		if vaultKey == "" {
			vaultKey = filepath.Join(n.dataDir, vault.DefaultKeyFile)
		}
		vaultKey = "key in " + vaultKey + " (back it up, apart from the database)"
		if storeURL != "" && o.vaultKey == "" {
			// Every node must seal and open the vault's secrets with one
			// key; a key file created in each node's data directory differs
			// from the others', and a secret set through one node would not
			// open on another.
			vaultKey += "\n           WARNING: every node on this PostgreSQL store needs the same vault key: " +
				"copy this file to the other nodes (--vault-key-file) or set " + vault.KeyEnv + " on all of them"
			log.Warn("the vault key is the one in this node's data directory: every node on this PostgreSQL store needs the same key", "hint", "copy it to the other nodes or set "+vault.KeyEnv, "key_file", filepath.Join(n.dataDir, vault.DefaultKeyFile))
		}
	}
	printServeBanner(c.stdout, n, cf, len(keys), vaultKey, sso)

	select {
	case <-ctx.Done():
		log.Info("signal received; draining", "http_timeout", httpDrainTimeout, "engine_timeout", engineDrainTimeout)
		if err := n.stop(ctx); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, "Longhaul stopped.")
		return nil
	case err := <-n.served:
		// Serve returned without Shutdown: the listener failed. Put the
		// result back for stop, which waits for it.
		n.served <- err
		stopErr := n.stop(context.WithoutCancel(ctx))
		return errors.Join(fmt.Errorf("serve http: %w", err), stopErr)
	}
}

// serveHosts returns the names allowed in the Host header (--allowed-host,
// or LONGHAUL_ALLOWED_HOSTS, plus the hosts of the public URLs) and the
// trusted origins (those of --public-url, or LONGHAUL_PUBLIC_URL).
func (c *cli) serveHosts(cmd *cobra.Command, o *serveOpts) (hosts, origins []string, err error) {
	hosts = o.allowedHosts
	if !cmd.Flags().Changed("allowed-host") {
		hosts = splitList(c.getenv("LONGHAUL_ALLOWED_HOSTS"))
	}
	for _, h := range hosts {
		if h == "" || strings.ContainsAny(h, "/*@?# \t") {
			return nil, nil, usagef("--allowed-host %q: want a host name or IP, optionally with :PORT (no scheme, path or wildcard)", h)
		}
	}
	urls := o.publicURLs
	if !cmd.Flags().Changed("public-url") {
		urls = splitList(c.getenv("LONGHAUL_PUBLIC_URL"))
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, nil, usagef("--public-url %q: want http(s)://HOST[:PORT], without a path", raw)
		}
		hosts = append(hosts, u.Host)
		origins = append(origins, u.Scheme+"://"+u.Host)
	}
	return hosts, origins, nil
}

// ssoSettings are serve's single sign-on behind a proxy (all zero: off).
type ssoSettings struct {
	header  string
	proxies []netip.Prefix
	users   []lhnode.ProxyUser
}

// singleSignOn reads --trusted-proxy-header and --trusted-proxy (both or
// neither) and the config file's users (there with them, and only then).
func singleSignOn(o *serveOpts, cf *configFile) (ssoSettings, error) {
	var users []configUser
	if cf != nil {
		users = cf.Users
	}
	h := o.trustedProxyHeader
	switch {
	case h == "" && len(o.trustedProxies) > 0:
		return ssoSettings{}, usagef("--trusted-proxy needs --trusted-proxy-header: the header the proxy names the user in (e.g. X-Forwarded-User)")
	case h == "" && len(users) > 0:
		return ssoSettings{}, usagef("the config file lists users, but --trusted-proxy-header is not set: they could never sign in")
	case h == "":
		return ssoSettings{}, nil
	case !headerNameRE.MatchString(h):
		return ssoSettings{}, usagef("--trusted-proxy-header %q: want a header name (letters, digits and -), e.g. X-Forwarded-User", h)
	case len(o.trustedProxies) == 0:
		return ssoSettings{}, usagef("--trusted-proxy-header needs --trusted-proxy CIDR: the networks the proxy connects from (the header is believed from them only)")
	case len(users) == 0:
		return ssoSettings{}, usagef("--trusted-proxy-header needs users in the config file (--config), e.g. users: [{name: alice@example.com, role: approver}]: every user would be refused")
	}
	out := ssoSettings{header: h}
	for _, raw := range o.trustedProxies {
		p, err := parseNetwork(raw)
		if err != nil {
			return ssoSettings{}, usagef("--trusted-proxy %q: want a network in CIDR notation or an IP address, e.g. 10.0.0.0/8 or 127.0.0.1", raw)
		}
		if p.Bits() == 0 {
			return ssoSettings{}, usagef("--trusted-proxy %q trusts every address: anyone could name any user; give the proxy's address or network", raw)
		}
		out.proxies = append(out.proxies, p)
	}
	for _, u := range users {
		out.users = append(out.users, lhnode.ProxyUser{Name: u.Name, Role: u.Role, Project: u.Project})
	}
	return out, nil
}

// headerNameRE is the shape of a proxy's user header.
var headerNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`)

// parseNetwork reads a CIDR, or an IP address as the network of that one
// address.
func parseNetwork(s string) (netip.Prefix, error) {
	if addr, err := netip.ParseAddr(s); err == nil {
		addr = addr.Unmap().WithZone("")
		return netip.PrefixFrom(addr, addr.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() {
		// Peers' addresses are compared unmapped (IPv4 as IPv4), so a
		// mapped network must be one of IPv4 addresses only.
		if p.Bits() < 96 {
			return netip.Prefix{}, errors.New("an IPv4-mapped network must be at least /96")
		}
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked(), nil
	}
	return p.Masked(), nil
}

// httpLimits turns the flags' values (0: off) into the node's HTTP limits
// (where 0 means the default and a negative value off).
func httpLimits(f lhnode.HTTPLimits) (lhnode.HTTPLimits, error) {
	for name, d := range map[string]time.Duration{
		"read-header-timeout": f.ReadHeaderTimeout, "read-timeout": f.ReadTimeout,
		"write-timeout": f.WriteTimeout, "idle-timeout": f.IdleTimeout,
	} {
		if d < 0 {
			return f, usagef("--%s %s: want a duration of 0 (no limit) or more", name, d)
		}
	}
	if f.MaxConnsPerIP < 0 {
		return f, usagef("--max-conns-per-ip %d: want 0 (no limit) or more", f.MaxConnsPerIP)
	}
	off := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	out := lhnode.HTTPLimits{
		ReadHeaderTimeout: off(f.ReadHeaderTimeout), ReadTimeout: off(f.ReadTimeout),
		WriteTimeout: off(f.WriteTimeout), IdleTimeout: off(f.IdleTimeout), MaxConnsPerIP: f.MaxConnsPerIP,
	}
	if out.MaxConnsPerIP == 0 {
		out.MaxConnsPerIP = -1
	}
	return out, nil
}

// serverConfig loads the config file: the one given by --config or
// LONGHAUL_CONFIG (which must exist), else longhaul.yaml when it exists, else
// none.
func (c *cli) serverConfig(cmd *cobra.Command, o *serveOpts) (*configFile, error) {
	path := c.flagOrEnv(cmd, "config", o.config, "LONGHAUL_CONFIG")
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		path = defaultConfigFile
	}
	return loadConfig(path)
}

// modelKeyEnv is the operator's allowlist of model key variables: the
// config file's model_key_env, then each --model-key-env NAME=HOST[,HOST]
// (a name given again takes the later hosts). The engine adds its defaults
// and validates the hosts.
func modelKeyEnv(cf *configFile, flags []string) (map[string][]string, error) {
	out := map[string][]string{}
	if cf != nil {
		for name, hosts := range cf.ModelKeyEnv {
			out[name] = hosts
		}
	}
	for _, f := range flags {
		name, hosts, ok := strings.Cut(f, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || splitList(hosts) == nil {
			return nil, usagef("--model-key-env %q: want NAME=HOST[,HOST] (the variable's name, not its value)", f)
		}
		out[name] = splitList(hosts)
	}
	return out, nil
}

// sandboxROPaths are the config file's sandbox_ro_paths, then each
// --sandbox-ro-path (the node checks them).
func sandboxROPaths(cf *configFile, flags []string) []string {
	var out []string
	if cf != nil {
		out = append(out, cf.SandboxROPaths...)
	}
	return append(out, flags...)
}

func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, usagef("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// splitList splits a comma-separated environment variable, dropping empty
// items and the spaces around items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func printServeBanner(w io.Writer, n *node, cf *configFile, keys int, vaultKey string, sso ssoSettings) {
	fmt.Fprintf(w, "Longhaul is listening on %s\n", n.url)
	if n.store.Kind == "SQLite" {
		fmt.Fprintf(w, "  data:    %s (database %s, workspaces in %s)\n", n.dataDir, dbFile, workspacesDir+string(filepath.Separator))
	} else {
		fmt.Fprintf(w, "  data:    %s (workspaces in %s)\n", n.dataDir, workspacesDir+string(filepath.Separator))
	}
	fmt.Fprintf(w, "  store:   %s\n", n.store)
	fmt.Fprintf(w, "  node:    %s\n", n.nodeID)
	sb := n.sandbox
	if sb == "local" {
		sb += " (commands are NOT isolated: install bubblewrap)"
	}
	fmt.Fprintf(w, "  sandbox: %s\n", sb)
	fmt.Fprintf(w, "  vault:   %s\n", vaultKey)
	if cf != nil {
		var parts []string
		for _, a := range n.agents {
			state := "unchanged"
			if a.created {
				state = "registered"
			}
			parts = append(parts, fmt.Sprintf("%s v%d (%s)", a.name, a.version, state))
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		fmt.Fprintf(w, "  agents:  %s, from %s\n", strings.Join(parts, ", "), cf.doc.name)
	}
	if keys == 0 {
		fmt.Fprintln(w, "  access:  no API keys configured: accepting requests from loopback addresses only")
	} else {
		fmt.Fprintf(w, "  access:  %d API key(s); requests need \"Authorization: Bearer <key>\"\n", keys)
	}
	if sso.header != "" {
		nets := make([]string, len(sso.proxies))
		for i, p := range sso.proxies {
			nets[i] = p.String()
		}
		fmt.Fprintf(w, "  sso:     %d user(s) named by %s from %s\n", len(sso.users), sso.header, strings.Join(nets, ", "))
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop; running steps finish first.")
}

// parseSandboxUser reads --sandbox-user: UID or UID:GID (the group defaults
// to the uid), numbers above 0.
func parseSandboxUser(v string) (uid, gid int, err error) {
	us, gs, hasGID := strings.Cut(v, ":")
	if !hasGID {
		gs = us
	}
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if err1 != nil || err2 != nil || uid <= 0 || gid <= 0 {
		return 0, 0, usagef("--sandbox-user %q: want UID or UID:GID, numbers above 0 (the sandbox never runs as root)", v)
	}
	return uid, gid, nil
}
