package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/engine"
	lhnode "github.com/longhaul-dev/longhaul/internal/node"
	"github.com/longhaul-dev/longhaul/internal/redact"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// This file runs one server node in this process: internal/node wires it
// (the store, SQLite in the data directory or PostgreSQL shared by several
// nodes; the vault, the sandbox, the engine, the webhooks, the trace
// export and the HTTP API), the same wiring the Go library (the root
// package) runs in an application; this file registers the configured
// agents, listens and serves the API. `serve` runs one until a signal;
// `demo` runs one on a free port when no server is given.

// Layout of a data directory.
const (
	dbFile        = lhnode.DBFile
	workspacesDir = lhnode.WorkspacesDir
	nodeIDFile    = lhnode.NodeIDFile
)

// Drain timeouts: how long open requests may take to finish once the
// listener is closed, and how long running steps may take to reach a point
// where they can be resumed.
const (
	httpDrainTimeout   = 10 * time.Second
	engineDrainTimeout = lhnode.EngineDrainTimeout
)

// nodeConfig says how to run a node.
type nodeConfig struct {
	addr    string
	dataDir string
	// storeURL is a PostgreSQL URL ("": SQLite in the data directory,
	// which holds the workspaces, the node id and the vault key either way).
	storeURL string
	// noMigrate refuses a schema older than this binary instead of
	// migrating it (an operator runs `longhaul migrate` apart).
	noMigrate bool
	// leaseTTL is the engine's lease TTL (0: the engine's default).
	leaseTTL time.Duration
	// relaxAfterAsks is node.Config.RelaxAfterAsks (0: its default).
	relaxAfterAsks int
	// runnerCheck is node.Config.RunnerCheckInterval (0: its default).
	runnerCheck time.Duration
	// runnerMaxConnsPerKey and runnerMaxConns are node.Config's runner
	// connection caps (0: their defaults).
	runnerMaxConnsPerKey, runnerMaxConns int
	apiKeys                              []string
	// pingInterval is how often idle event streams get a ": ping" comment
	// (0: the server's default, 15 s).
	pingInterval time.Duration
	// config, when not nil, holds agents registered before the node serves.
	config *configFile
	logger *slog.Logger
	// vaultKeyFile is the vault's key file ("": vault.key in the data
	// directory, created on first use).
	vaultKeyFile string
	// vaultKeyEnv is the value of LONGHAUL_VAULT_KEY ("": use the file).
	vaultKeyEnv string
	// sandbox is auto (bwrap when it works, else local), bwrap or local.
	sandbox string
	// sandboxDiskMB is the default workspace quota (serve --sandbox-disk-mb).
	sandboxDiskMB int
	// browserMemoryMB: serve --browser-memory-mb.
	browserMemoryMB int
	// sandboxUID and sandboxGID: serve --sandbox-user (0: the default).
	sandboxUID, sandboxGID int
	// sandboxROPaths: serve --sandbox-ro-path and the config file's
	// sandbox_ro_paths.
	sandboxROPaths []string
	// redactor, when set, is kept up to date with the vault's secrets (the
	// log writer reads it).
	redactor *atomic.Pointer[redact.Redactor]
	// webhookAllowPrivate lists private addresses that webhooks may reach
	// (by default none: see internal/webhook).
	webhookAllowPrivate []string
	// otlp, when set, exports each turn this node ends as an
	// OpenTelemetry trace.
	otlp *otlpSettings
	// webhookAllowPorts are destination ports webhooks may reach besides
	// the default 80 and 443.
	webhookAllowPorts []int
	// metricsPublic serves /metrics without the API's access rule.
	metricsPublic bool
	// modelKeyEnv are the environment variables agents may name as a
	// model's api_key_env, with their hosts, besides the engine's defaults.
	modelKeyEnv map[string][]string
	// controlPlaneAddrs are addresses of the control plane besides this
	// node's listener and its database.
	controlPlaneAddrs []string
	// allowedHosts and trustedOrigins: see server.Config.
	allowedHosts, trustedOrigins []string
	// httpLimits bound what one client can hold (zero: the defaults).
	httpLimits lhnode.HTTPLimits
	// minFreeMiB is the free-space floor of the data volume (0: the
	// node's default; negative: none).
	minFreeMiB int64
	// auditRetention is how long audit entries are kept (0: the node's
	// default; negative: for ever); auditLog receives them as log lines
	// (nil: logger).
	auditRetention time.Duration
	auditLog       *slog.Logger
	// idempotencyRetention is how long idempotency records are kept (0:
	// the node's default; negative: for ever).
	idempotencyRetention time.Duration
	// rateLimit is serve --rate-limit ("": no limits).
	rateLimit string
	// sso is single sign-on behind a reverse proxy (zero: off).
	sso ssoSettings
}

// node is a running server node.
type node struct {
	url     string // base URL of the API, e.g. http://127.0.0.1:8080
	addr    net.Addr
	dataDir string // absolute
	nodeID  string
	agents  []agentRegistration

	log     *slog.Logger
	store   *openedStore
	sandbox string // the sandbox backend: bwrap or local
	engine  *engine.Engine
	// wired is the node's components (internal/node).
	wired  *lhnode.Node
	http   *http.Server
	served chan error // the result of http.Server.Serve
}

// agentRegistration reports what start-up did with one configured agent.
type agentRegistration struct {
	// name is the agent's name, prefixed with its project ("support/")
	// outside the default project.
	name    string
	version int
	created bool
}

// startNode listens on cfg.addr, opens (creating if needed) the data
// directory, opens the store
// and migrates it (or, with noMigrate, checks that it is migrated),
// registers the configured agents, starts the engine and serves the API.
// On error, everything it started is stopped again.
func startNode(ctx context.Context, cfg nodeConfig) (_ *node, err error) {
	log := cfg.logger
	// Listen first: a busy port fails the start before the data directory
	// is created or its database migrated (and before any session is
	// touched). Connections wait in the backlog until Serve below.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	defer func() {
		if err != nil {
			_ = ln.Close()
		}
	}()
	var otlp *lhnode.OTLP
	if cfg.otlp != nil {
		otlp = &lhnode.OTLP{Endpoint: cfg.otlp.endpoint, Protocol: cfg.otlp.protocol}
	}
	w, err := lhnode.Open(ctx, &lhnode.Config{
		DataDir: cfg.dataDir, StoreURL: cfg.storeURL, NoMigrate: cfg.noMigrate, LeaseTTL: cfg.leaseTTL, RelaxAfterAsks: cfg.relaxAfterAsks, RunnerCheckInterval: cfg.runnerCheck,
		RunnerMaxConnsPerKey: cfg.runnerMaxConnsPerKey, RunnerMaxConns: cfg.runnerMaxConns,
		APIKeys: cfg.apiKeys, PingInterval: cfg.pingInterval, Logger: log,
		VaultKeyFile: cfg.vaultKeyFile, VaultKey: cfg.vaultKeyEnv, Sandbox: cfg.sandbox, SandboxDiskMB: cfg.sandboxDiskMB, BrowserMemoryMB: cfg.browserMemoryMB, SandboxROPaths: cfg.sandboxROPaths, SandboxUID: cfg.sandboxUID, SandboxGID: cfg.sandboxGID, Redactor: cfg.redactor,
		WebhookAllowPrivate: cfg.webhookAllowPrivate, WebhookAllowPorts: cfg.webhookAllowPorts,
		OTLP: otlp, MetricsPublic: cfg.metricsPublic,
		ModelKeyEnv: cfg.modelKeyEnv, ControlPlaneAddrs: cfg.controlPlaneAddrs,
		AllowedHosts: cfg.allowedHosts, TrustedOrigins: cfg.trustedOrigins, MinFreeMiB: cfg.minFreeMiB,
		AuditRetention: cfg.auditRetention, IdempotencyRetention: cfg.idempotencyRetention, AuditLog: cfg.auditLog, RateLimit: cfg.rateLimit,
		TrustedProxyHeader: cfg.sso.header, TrustedProxies: cfg.sso.proxies, ProxyUsers: cfg.sso.users,
	})
	if err != nil {
		var se *lhnode.StoreOpenError
		if errors.As(err, &se) {
			return nil, unreachableStore(se.Err)
		}
		return nil, err
	}
	n := &node{
		dataDir: w.DataDir, nodeID: w.NodeID, log: log, store: w.Store, sandbox: w.Sandbox, engine: w.Engine,
		wired: w, served: make(chan error, 1),
	}
	var undo []func()
	undo = append(undo, func() { _ = w.Close(context.WithoutCancel(ctx)) })
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	if cfg.config != nil {
		if n.agents, err = registerAgents(ctx, n.wired, cfg.config); err != nil {
			return nil, err
		}
	}
	// Before the engine resumes any session: no session may reach the
	// API it is served by.
	if err := w.Serving(ctx, ln.Addr().String()); err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}

	n.addr = ln.Addr()
	n.url = "http://" + ln.Addr().String()
	n.http = lhnode.HTTPServer(w.API, cfg.httpLimits, log)
	// Event streams stay open until their client leaves; Shutdown ends them
	// so that http.Server.Shutdown is not held open by them.
	n.http.RegisterOnShutdown(w.API.Shutdown)
	limited := lhnode.LimitConnsPerIP(ln, cfg.httpLimits)
	go func() { n.served <- n.http.Serve(limited) }()
	log.Info("serving", "addr", n.addr.String(), "data", n.dataDir, "store", n.store.String(), "node", n.nodeID)
	return n, nil
}

// stop drains the node: it stops accepting requests (open ones get
// httpDrainTimeout to finish, event streams are ended), then lets running
// steps finish or leaves them resumable (engineDrainTimeout), then closes the
// database. ctx may already be cancelled (a signal): the drain still runs.
func (n *node) stop(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error

	httpCtx, cancel := context.WithTimeout(ctx, httpDrainTimeout)
	if err := n.http.Shutdown(httpCtx); err != nil {
		n.log.Warn("requests still open after the drain timeout; closing them", "err", err)
		_ = n.http.Close()
	}
	cancel()
	if err := <-n.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serve http: %w", err))
	}
	// The engine, then the trace export (turns that ended during the
	// drain are exported), then the webhooks (pending deliveries stay in
	// the outbox for the next start), then the database and the lock.
	if err := n.wired.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	n.log.Info("stopped")
	return errors.Join(errs...)
}

// lockDataDir takes the data directory's lock (see lhnode.LockDataDir),
// for the commands that open a store without running a node.
func lockDataDir(dir string) (unlock func(), err error) { return lhnode.LockDataDir(dir) }

// agentEnsurer is what registering the config file's agents needs: the
// application service's EnsureAgent (the rule of lt.SameAgentSpec), called
// as the config file's caller (lhnode.Node.EnsureAgent).
type agentEnsurer interface {
	EnsureAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, bool, error)
}

// registerAgents puts every agent of the config file whose spec differs from
// its latest version. A refusal names the file, the line and the field.
func registerAgents(ctx context.Context, agents agentEnsurer, cf *configFile) ([]agentRegistration, error) {
	out := make([]agentRegistration, 0, len(cf.Agents))
	for i := range cf.Agents {
		req := &cf.Agents[i]
		a, created, err := agents.EnsureAgent(ctx, req)
		if err != nil {
			var ae *apierror.Error
			if errors.As(err, &ae) && ae.Code == lt.CodeInvalidRequest {
				field := fmt.Sprintf("agents[%d]", i)
				if ae.Field != "" {
					field += "." + ae.Field
				}
				return nil, cf.doc.errorAt(field, ae.Message)
			}
			return nil, fmt.Errorf("register agent %s from %s: %w", req.Name, cf.doc.name, err)
		}
		name := a.Name
		if a.Project != lt.DefaultProject {
			name = a.Project + "/" + a.Name
		}
		out = append(out, agentRegistration{name: name, version: a.Version, created: created})
	}
	return out, nil
}
