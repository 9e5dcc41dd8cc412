package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/longhaul-dev/longhaul/internal/app"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/remote"
	"github.com/longhaul-dev/longhaul/internal/freespace"
	"github.com/longhaul-dev/longhaul/internal/metrics"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/anthropic"
	"github.com/longhaul-dev/longhaul/internal/model/openai"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/otelexport"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/vault"
	"github.com/longhaul-dev/longhaul/internal/webhook"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Drain timeouts of Close when its ctx sets no deadline: how long running
// steps may take to reach a point where they can be resumed, and how long
// the trace export may take to send what it holds.
const (
	EngineDrainTimeout = 30 * time.Second
	OTelDrainTimeout   = 10 * time.Second
)

// Sandbox choices (Config.Sandbox).
const (
	SandboxAuto  = "auto"
	SandboxBwrap = "bwrap"
	SandboxLocal = "local"
)

// Runner connection caps' defaults (Config.RunnerMaxConnsPerKey,
// Config.RunnerMaxConns): the hub's.
const (
	DefaultRunnerMaxConnsPerKey = hub.DefaultMaxConnsPerKey
	DefaultRunnerMaxConns       = hub.DefaultMaxConns
)

// ProxyUser is an identity a trusted reverse proxy may sign a user in as
// (Config.ProxyUsers; see app.ProxyUser).
type ProxyUser = app.ProxyUser

// Config says how to run a node. Zero fields mean the default named in
// their comment.
type Config struct {
	// DataDir holds the workspaces, the node id, the vault's key file and,
	// without StoreURL, the SQLite database. Required; created if missing.
	DataDir string
	// StoreURL is a PostgreSQL URL. Default: SQLite in DataDir.
	StoreURL string
	// NoMigrate refuses a schema older than this binary instead of
	// migrating it (an operator runs `longhaul migrate` apart).
	NoMigrate bool
	// LeaseTTL is the engine's lease TTL. Default: the engine's (30 s).
	LeaseTTL time.Duration
	// RelaxAfterAsks is how many asks, every one approved, flag a policy
	// rule as a candidate to relax in task reports. Default
	// lt.DefaultRelaxAfterAsks (20).
	RelaxAfterAsks int
	// APIKeys are the bearer tokens the API accepts. Default: none, and the
	// API answers loopback peers only.
	APIKeys []string
	// PingInterval is how often idle event streams get a ": ping" comment,
	// and, without PollInterval, how often the journals they follow are
	// read again in case a notice was lost. Default: the server's (15 s).
	PingInterval time.Duration
	// PollInterval is how often a followed journal (the App's streams) is
	// read again in case a notice was lost: the Go library reads more
	// often than an HTTP stream pings. Default: PingInterval.
	PollInterval time.Duration
	// RunnerCheckInterval is how often a connected runner's key is read
	// again (a revocation closes its connection) and its liveness
	// recorded; a runner not seen for three intervals (its node died) is
	// no longer listed. Default hub.DefaultTouchInterval (5 s).
	RunnerCheckInterval time.Duration
	// RunnerMaxConnsPerKey bounds the runner connections one key holds to
	// this node at once; one more is refused (close 4007). Default
	// DefaultRunnerMaxConnsPerKey.
	RunnerMaxConnsPerKey int
	// RunnerMaxConns bounds this node's runner connections at once, all
	// keys together. Default DefaultRunnerMaxConns.
	RunnerMaxConns int
	// Logger receives the node's logs. Default: slog.Default().
	Logger *slog.Logger
	// VaultKeyFile is the vault's key file. Default: vault.key in DataDir,
	// created on first use.
	VaultKeyFile string
	// VaultKey is the vault's key itself (base64, as LONGHAUL_VAULT_KEY
	// gives it). Default: the key file.
	VaultKey string
	// Sandbox is SandboxAuto (bwrap when it works, else local with a
	// warning), SandboxBwrap (refuse to start without it) or SandboxLocal
	// (no isolation). Default: SandboxAuto.
	Sandbox string
	// SandboxDiskMB is the workspace quota, in MiB, of sessions whose
	// agent sets no environment.disk_mb. Default: sandbox.DefaultDiskBytes.
	SandboxDiskMB int
	// BrowserMemoryMB bounds each session's browser, in MiB. Default:
	// browser.DefaultMemoryBytes.
	BrowserMemoryMB int
	// SandboxROPaths are host directories every bwrap sandbox sees
	// read-only at the same place (serve --sandbox-ro-path). Never the data
	// directory, the workspaces or the vault's key file, nor a directory
	// holding one. Default: none.
	SandboxROPaths []string
	// SandboxUID and SandboxGID are the host user and group the sandboxes
	// of a server running as root run as. Default: sandbox.DefaultUID and
	// sandbox.DefaultGID (65534, nobody and nogroup).
	SandboxUID, SandboxGID int
	// Redactor, when set, is kept up to date with the vault's secrets (a
	// log writer reads it). Default: none.
	Redactor *atomic.Pointer[redact.Redactor]
	// WebhookAllowPrivate lists private addresses webhooks may reach.
	// Default: none (see internal/webhook).
	WebhookAllowPrivate []string
	// WebhookAllowPorts are ports webhooks may reach besides 80 and 443.
	WebhookAllowPorts []int
	// OTLP, when set, exports each turn this node ends as an OpenTelemetry
	// trace. Default: no export.
	OTLP *OTLP
	// MetricsPublic serves /metrics without the API's access rule.
	MetricsPublic bool
	// AllowedHosts and TrustedOrigins are the API's (server.Config): names
	// the Host header may give besides the listener's own address, and
	// browser origins allowed to send state-changing requests.
	AllowedHosts   []string
	TrustedOrigins []string
	// TrustedProxyHeader, TrustedProxies and ProxyUsers are the API's
	// single sign-on behind a reverse proxy (server.Config): the header a
	// proxy names the signed-in user in, the networks it is believed from,
	// and the identities it may name. Default: none.
	TrustedProxyHeader string
	TrustedProxies     []netip.Prefix
	ProxyUsers         []ProxyUser
	// Tools are tools agents may enable besides the built-ins (the Go
	// library's tools). A name must not be a built-in's.
	Tools []tool.Tool
	// MinFreeMiB is the free-space floor of the data directory's volume
	// (and the workspaces'): below it the node claims and creates no
	// session and /readyz is 503. Default (0): freespace.DefaultFloorMiB;
	// negative: no floor.
	MinFreeMiB int64
	// FreeSpace, when set, replaces statfs(2) in the free-space checks
	// (tests). Default: statfs.
	FreeSpace func(dir string) (uint64, error)
	// Providers are model providers besides (or replacing, by name) the
	// built-in ones (DefaultProviders).
	Providers map[string]model.Provider
	// ModelKeyEnv are environment variables agents may name as a model's
	// api_key_env, each with the hosts its key may go to, besides
	// engine.DefaultModelKeyEnv (a default's name given here takes these
	// hosts instead). Default: the engine's defaults only.
	ModelKeyEnv map[string][]string
	// ControlPlaneAddrs are addresses (HOST:PORT) of this deployment's
	// control plane besides the nodes' listeners (announced through the
	// store, see Serving) and the database, which sessions may never
	// reach: a load balancer in front of the nodes. Default: none.
	ControlPlaneAddrs []string
	// AuditRetention is how long the audit log keeps an entry; the node
	// prunes older ones every PruneInterval. Default (0):
	// app.DefaultAuditRetention; negative: keep every entry.
	AuditRetention time.Duration
	// IdempotencyRetention is how long the response to a request with an
	// Idempotency-Key is kept to answer its repeats; the node prunes older
	// ones, and the claims that lapsed before, every PruneInterval. A
	// repeat after that runs as a new request. At least
	// server.MinIdempotencyRetention. Default (0):
	// DefaultIdempotencyRetention; negative: keep every response.
	IdempotencyRetention time.Duration
	// AuditLog receives each audit entry as a log line (serve gives it a
	// JSON handler). Default: Logger.
	AuditLog *slog.Logger
	// RateLimit is the API's per-key rate limits, a server.ParseRateLimits
	// spec ("read=100/s,write=20/s"). Default "": no limits.
	RateLimit string
}

// OTLP says where a node exports turn traces.
type OTLP struct {
	// Endpoint is the collector's URL ("": the OTEL_EXPORTER_OTLP_*
	// variables, which the exporter reads itself).
	Endpoint string
	// Protocol is one of otelexport's protocols ("": its default).
	Protocol string
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return errors.New("node config: DataDir is required")
	}
	switch c.Sandbox {
	case "", SandboxAuto, SandboxBwrap, SandboxLocal:
	default:
		return fmt.Errorf("node config: Sandbox %q: want %s, %s or %s", c.Sandbox, SandboxAuto, SandboxBwrap, SandboxLocal)
	}
	if err := ValidRateLimit(c.RateLimit); err != nil {
		return fmt.Errorf("node config: RateLimit: %w", err)
	}
	if c.RelaxAfterAsks < 0 {
		return fmt.Errorf("node config: RelaxAfterAsks %d is negative", c.RelaxAfterAsks)
	}
	if c.LeaseTTL < 0 {
		return fmt.Errorf("node config: LeaseTTL %s is negative", c.LeaseTTL)
	}
	if c.RunnerCheckInterval < 0 {
		return fmt.Errorf("node config: RunnerCheckInterval %s is negative", c.RunnerCheckInterval)
	}
	if r := c.IdempotencyRetention; r > 0 && r < MinIdempotencyRetention {
		return fmt.Errorf("node config: IdempotencyRetention %s is under %s (0: the default; negative: keep every response)", r, MinIdempotencyRetention)
	}
	if c.RunnerMaxConnsPerKey < 0 || c.RunnerMaxConns < 0 {
		return fmt.Errorf("node config: RunnerMaxConnsPerKey (%d) and RunnerMaxConns (%d) must not be negative", c.RunnerMaxConnsPerKey, c.RunnerMaxConns)
	}
	for _, p := range c.WebhookAllowPorts {
		if p < 1 || p > 65535 {
			return fmt.Errorf("node config: WebhookAllowPorts: %d is not a port number (1-65535)", p)
		}
	}
	names := map[string]bool{}
	for _, t := range tool.Builtins() {
		names[t.Name()] = true
	}
	for i, t := range c.Tools {
		switch {
		case t == nil:
			return fmt.Errorf("node config: Tools[%d] is nil", i)
		case names[t.Name()]:
			return fmt.Errorf("node config: Tools[%d]: the name %q is taken", i, t.Name())
		case engine.ReservedToolName(t.Name()):
			return fmt.Errorf("node config: Tools[%d]: %q is a tool the engine runs itself", i, t.Name())
		}
		names[t.Name()] = true
	}
	return nil
}

// Node is one node's components, wired. Open builds them; Start runs
// them; Close stops them.
type Node struct {
	// DataDir is the data directory, absolute.
	DataDir string
	NodeID  string
	// Sandbox is the sandbox backend: bwrap or local.
	Sandbox string
	// SandboxWarning is what the sandbox's detection warned about ("":
	// nothing).
	SandboxWarning string

	Store  *Store
	Vault  *vault.Vault
	Engine *engine.Engine
	// Webhooks sends outgoing webhooks.
	Webhooks *webhook.Dispatcher
	// Metrics is served at /metrics; the engine and the webhooks write
	// through its store decorator, which counts this node's work.
	Metrics *metrics.Metrics
	// OTel exports turn traces over OTLP (nil: off).
	OTel *otelexport.Exporter
	// API is the HTTP API, the handler a listener serves. Call its
	// Shutdown before the listener's, so that open event streams end.
	API *server.Server
	// Runners holds the runners (self-managed environments) connected to
	// this node; API serves their connections into it.
	Runners *hub.Hub
	// WebhookAPI and VaultAPI serve the webhooks' and the vault's
	// endpoints (API embeds them); in-process callers use them directly.
	WebhookAPI *webhook.API
	VaultAPI   *vault.API
	// Reports serves the task reports (API embeds it).
	Reports *report.Service
	// App is the application service: every use case of the API, which
	// the HTTP API and the Go library both serve.
	App *app.App
	// PollInterval is how often the App's streams read the journals they
	// follow again (Config.PollInterval, else Config.PingInterval, else
	// app.DefaultPollInterval).
	PollInterval time.Duration
	// ControlPlane holds the addresses no session may reach: the
	// database's (from the store URL), Config.ControlPlaneAddrs, and this
	// node's listener once Serving is told it.
	ControlPlane *egress.ControlPlane

	log    *slog.Logger
	otlp   *OTLP
	unlock func()
	// auditRetention and idempotencyRetention are Config's with their
	// defaults (negative: no pruning); their pruners run while the node
	// does.
	auditRetention, idempotencyRetention time.Duration
	auditPruner, idempotencyPruner       *pruner

	mu sync.Mutex
	// running: Start was called and the node not stopped since;
	// engineRunning and webhooksRunning say which parts started (OTel is
	// set only while the export runs).
	running, engineRunning, webhooksRunning bool
	closed                                  bool
	closeErr                                error
}

// Open opens (creating if needed) the data directory and takes its lock,
// opens the store and migrates it (or, with NoMigrate, checks that it is
// migrated), opens the vault, detects the sandbox and builds the engine,
// the webhook dispatcher and the API, without starting anything: the
// caller may register agents and take its listener first, then Start. On
// error, everything it opened is closed again; otherwise Close releases it.
func Open(ctx context.Context, cfg *Config) (_ *Node, err error) {
	if cfg == nil {
		return nil, errors.New("node config: nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	rateLimits, err := server.ParseRateLimits(cfg.RateLimit)
	if err != nil {
		return nil, err
	}
	srvCfg := &server.Config{APIKeys: cfg.APIKeys, Logger: log, PingInterval: cfg.PingInterval, MetricsPublic: cfg.MetricsPublic,
		AllowedHosts: cfg.AllowedHosts, TrustedOrigins: cfg.TrustedOrigins,
		AuditLog: cmp.Or(cfg.AuditLog, log), RateLimits: rateLimits,
		TrustedProxyHeader: cfg.TrustedProxyHeader, TrustedProxies: cfg.TrustedProxies, ProxyUsers: cfg.ProxyUsers}
	if err := srvCfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %q: %w", cfg.DataDir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	n := &Node{DataDir: dir, log: log, otlp: cfg.OTLP, auditRetention: cmp.Or(cfg.AuditRetention, app.DefaultAuditRetention),
		idempotencyRetention: cmp.Or(cfg.IdempotencyRetention, DefaultIdempotencyRetention)}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	if n.unlock, err = LockDataDir(dir); err != nil {
		return nil, err
	}
	undo = append(undo, n.unlock)
	if err := tightenDataDir(dir); err != nil {
		return nil, err
	}
	if n.NodeID, err = LoadNodeID(dir); err != nil {
		return nil, err
	}

	if n.Store, err = OpenStore(ctx, StoreChoice{URL: cfg.StoreURL, DataDir: dir}, log, true); err != nil {
		return nil, &StoreOpenError{Err: err}
	}
	undo = append(undo, func() { _ = n.Store.Close() })
	if err := CheckSchema(ctx, n.Store, !cfg.NoMigrate); err != nil {
		return nil, err
	}

	// The vault: its key comes from the caller or a key file in the data
	// directory; it must decrypt what is stored, or nothing could be
	// redacted and the node refuses to start.
	keyFile := cfg.VaultKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(dir, vault.DefaultKeyFile)
	}
	key, err := vault.LoadKey(cfg.VaultKey, keyFile)
	if err != nil {
		return nil, fmt.Errorf("vault key: %w", err)
	}
	if cfg.VaultKey != "" {
		// The key came from the environment (LONGHAUL_VAULT_KEY): no child
		// process inherits it.
		_ = os.Unsetenv(vault.KeyEnv)
	}
	if n.Vault, err = vault.Open(n.Store, key, nil); err != nil {
		return nil, fmt.Errorf("open the vault: %w", err)
	}
	if err := n.Vault.Check(ctx); err != nil {
		return nil, fmt.Errorf("the vault key does not decrypt the stored secrets: %w", err)
	}
	refreshRedactor := func() {
		if cfg.Redactor == nil {
			return
		}
		r, err := n.Vault.Redactor(context.WithoutCancel(ctx))
		if err != nil {
			log.Error("load secrets for log redaction", "err", err)
			return
		}
		cfg.Redactor.Store(r)
	}
	refreshRedactor()

	roPaths, err := checkSandboxROPaths(cfg.SandboxROPaths, dir, keyFile)
	if err != nil {
		return nil, err
	}
	sb, warning := sandbox.Detect(ctx, sandbox.DetectOptions{
		Local: cfg.Sandbox == SandboxLocal, DiskBytes: int64(cfg.SandboxDiskMB) << 20,
		Bwrap: sandbox.BwrapOptions{UID: cfg.SandboxUID, GID: cfg.SandboxGID, ReadOnlyPaths: roPaths},
	})
	if cfg.Sandbox == SandboxBwrap && sb.Name() != SandboxBwrap {
		return nil, fmt.Errorf("--sandbox bwrap: %s", warning)
	}
	if cfg.Sandbox == SandboxLocal {
		warning = "sandbox: the local backend was chosen (--sandbox local): shell commands are not isolated"
	}
	if warning != "" {
		log.Warn(warning)
	}
	n.Sandbox, n.SandboxWarning = sb.Name(), warning

	// The control plane: what no session may reach, however its agent
	// lists it (this node's listener is added by Serving).
	n.ControlPlane = &egress.ControlPlane{}
	if err := n.ControlPlane.Set(egress.GroupExtra, "the server's control plane", cfg.ControlPlaneAddrs); err != nil {
		return nil, fmt.Errorf("node config: ControlPlaneAddrs: %w", err)
	}
	if cfg.StoreURL != "" {
		addrs, err := postgres.Addresses(cfg.StoreURL)
		if err != nil {
			return nil, err
		}
		if err := n.ControlPlane.Set(egress.GroupDatabase, "the server's own database", addrs); err != nil {
			return nil, err
		}
	}
	keyEnv := engine.DefaultModelKeyEnv()
	maps.Copy(keyEnv, cfg.ModelKeyEnv)

	// The engine and the webhook dispatcher write through the metrics'
	// decorator: the counters count what this node writes.
	floor := cfg.MinFreeMiB
	switch {
	case floor == 0:
		floor = freespace.DefaultFloorMiB
	case floor < 0:
		floor = 0
	}
	// The workspaces are in the data directory, but may be a mount of
	// their own; both are "the data volume" to whoever reads a message.
	space, err := freespace.New([]freespace.Volume{
		{Dir: dir, Name: "the data volume"},
		{Dir: filepath.Join(dir, WorkspacesDir), Name: "the data volume"},
	}, floor, &freespace.Config{Free: cfg.FreeSpace, Logger: log})
	if err != nil {
		return nil, err
	}

	n.Metrics = metrics.New(n.Store, &metrics.Config{Logger: log})
	writes := n.Metrics.Wrap(n.Store)
	srvCfg.Metrics = n.Metrics.Handler()
	var tools []tool.Tool // nil: the engine's built-ins
	if len(cfg.Tools) > 0 {
		tools = append(tool.Builtins(), cfg.Tools...)
	}
	providers := DefaultProviders()
	maps.Copy(providers, cfg.Providers)
	// The sessions' environments: this machine's (the sandbox detected
	// above), over the engine's workspaces and snapshot cache.
	spaces, err := workspace.New(filepath.Join(dir, WorkspacesDir))
	if err != nil {
		return nil, fmt.Errorf("open workspaces: %w", err)
	}
	// With bwrap the workspaces are watched, so a shell step's checkpoint
	// reads only what the command changed; its seccomp filter denies hard
	// links, which the watches cannot follow. Without it, a workspace is
	// watched while it is empty (nothing in it has another name), so the
	// checkpoint after a tool that wrote nothing is not a walk.
	// A record per workspace for the sessions the engine runs at once
	// (workers, given to both).
	workers := engine.DefaultMaxWorkers
	snapshots, err := snapshot.NewCache(writes, &snapshot.CacheConfig{
		Watch: sb.Name() == SandboxBwrap, WatchEmptyRoots: true, MaxRecords: snapshot.RecordsFor(workers),
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot cache: %w", err)
	}
	envs, err := environment.NewLocal(&environment.LocalConfig{
		Sandbox: sb, Workspaces: spaces, Blobs: writes, Owners: n.Store, Cache: snapshots, SocketDir: filepath.Join(dir, RuntimeDir), Logger: log,
	})
	if err != nil {
		_ = snapshots.Close()
		return nil, err
	}
	// The runners connected to this node: a session whose agent asks for
	// one (environment.runner) gets its environment there.
	runnerCheck := cmp.Or(cfg.RunnerCheckInterval, hub.DefaultTouchInterval)
	n.Runners = hub.New(n.NodeID, n.Store, &hub.Config{TouchInterval: runnerCheck, Logger: n.log,
		MaxConnsPerKey: cfg.RunnerMaxConnsPerKey, MaxConns: cfg.RunnerMaxConns, Blobs: n.Store, Owners: n.Store,
		OnConnect: n.wakeForRunner,
		// A slot the runner freed by closing an open this node gave up
		// on: one session waiting for it may go on.
		OnAbandoned: func(row store.RunnerRow) { n.wakeForFreedRunner(row.Project, row.Name, row.KeyID, row.Labels, 1) }})
	routed, err := remote.NewRouter(&remote.RouterConfig{Local: envs, Hub: n.Runners, Logger: log, OnFreed: n.wakeForFreedRunner})
	if err != nil {
		_ = snapshots.Close()
		return nil, err
	}
	n.Engine, err = engine.New(writes, &engine.Config{
		Workspaces:       spaces,
		SnapshotCache:    snapshots,
		MaxWorkers:       workers,
		Environments:     routed,
		WorkspaceRoot:    filepath.Join(dir, WorkspacesDir),
		RuntimeDir:       filepath.Join(dir, RuntimeDir),
		DataDir:          dir,
		NodeID:           n.NodeID,
		LeaseTTL:         cfg.LeaseTTL,
		Providers:        providers,
		Tools:            tools,
		Logger:           log,
		Sandbox:          sb,
		SandboxWarning:   warning,
		BrowserMemory:    int64(cfg.BrowserMemoryMB) << 20,
		OnSecretsChanged: refreshRedactor,
		Vault:            n.Vault,
		ModelKeyEnv:      keyEnv,
		ControlPlane:     n.ControlPlane,
		FreeSpace:        space.Check,
	})
	if err != nil {
		_ = snapshots.Close() // the engine closes it on Stop, once it has it
		return nil, fmt.Errorf("create engine: %w", err)
	}

	var webhookPorts []int // nil: the dispatcher's default, 80 and 443
	if len(cfg.WebhookAllowPorts) > 0 {
		webhookPorts = append(slices.Clone(egress.DefaultPorts), cfg.WebhookAllowPorts...)
	}
	if n.Webhooks, err = webhook.New(writes, &webhook.Config{NodeID: n.NodeID, AllowPrivate: cfg.WebhookAllowPrivate, Ports: webhookPorts, Logger: log}); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	n.WebhookAPI, n.VaultAPI, n.Reports = webhook.NewAPI(n.Webhooks), vault.NewAPI(n.Vault), report.New(n.Store, &report.Config{RelaxAfterAsks: cfg.RelaxAfterAsks})
	// A followed journal is read again as often as an idle stream pings,
	// unless the caller (the library) says otherwise.
	n.PollInterval = cmp.Or(cfg.PollInterval, cfg.PingInterval, app.DefaultPollInterval)
	if n.App, err = app.New(app.Deps{Engine: n.Engine, Vault: n.VaultAPI, Webhooks: n.WebhookAPI, Reports: n.Reports, Store: n.Store,
		Logger: n.log, PollInterval: n.PollInterval, RunnerStaleAfter: hub.StaleAfter(runnerCheck)}); err != nil {
		return nil, err
	}
	srvCfg.Keys = n.App
	srvCfg.Runners = n.Runners
	srvCfg.NodeID = n.NodeID
	srvCfg.Audit = n.App
	n.API = server.New(n.App, n.Store, srvCfg)
	return n, nil
}

// Serving tells the node the addresses its API listens on (a listener's
// Addr().String(), "127.0.0.1:8080" or "[::]:8080"), so that no session
// reaches them: call it before Start, which resumes sessions. It announces
// them in the store too, where every node on it reads the others'
// (refreshed at most every NodesRefreshInterval, when a connection is
// checked): a session on one node cannot reach another node's API either.
// A listener on every address is announced with each address of this
// host's interfaces, which is how other hosts reach it.
func (n *Node) Serving(ctx context.Context, addrs ...string) error {
	if err := n.ControlPlane.Set(egress.GroupListen, "the server's own API", addrs); err != nil {
		return err
	}
	announced := announceAddrs(addrs)
	if err := n.Store.NodeAnnounce(ctx, &store.NodeRow{ID: n.NodeID, Addrs: announced, AnnouncedAt: time.Now().UTC()}); err != nil {
		return fmt.Errorf("announce this node's address: %w", err)
	}
	n.ControlPlane.SetRefresher(NodesRefreshInterval, time.Now, func(ctx context.Context) error {
		rows, err := n.Store.NodeList(ctx)
		if err != nil {
			n.log.Warn("read the other nodes' addresses", "err", err)
			return err
		}
		var all []string
		for _, r := range rows {
			if r.ID != n.NodeID { // this node's are GroupListen's
				all = append(all, r.Addrs...)
			}
		}
		if err := n.ControlPlane.Set(egress.GroupNodes, "the API of a node of this server", all); err != nil {
			n.log.Warn("a node announced an invalid address", "err", err)
			return err
		}
		return nil
	})
	return nil
}

// NodesRefreshInterval is how often, at most, a node re-reads the other
// nodes' announced addresses.
const NodesRefreshInterval = 5 * time.Second

// announceAddrs is what a node announces for its listeners: each address,
// and for one on every address (0.0.0.0, [::]) also each address of this
// host's interfaces at its port; at most storeutil.MaxNodeAddrs in all.
func announceAddrs(addrs []string) []string {
	var out []string
	add := func(a string) {
		if len(out) < storeutil.MaxNodeAddrs && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, a := range addrs {
		add(a)
	}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			continue
		}
		ifaddrs, err := net.InterfaceAddrs()
		if err != nil {
			continue
		}
		for _, ia := range ifaddrs {
			if ipn, ok := ia.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				add(net.JoinHostPort(ipn.IP.String(), port))
			}
		}
	}
	return out
}

// StoreOpenError is Open's error when the store could not be opened (for
// PostgreSQL: reached, or logged in to), so that a caller can tell it from
// the rest and say what to check. Its message is Err's.
type StoreOpenError struct{ Err error }

func (e *StoreOpenError) Error() string { return e.Err.Error() }
func (e *StoreOpenError) Unwrap() error { return e.Err }

// Start runs the node: the trace export (when configured; it follows
// journals from before the engine runs, so no turn this node ends is
// missed), the engine (which resumes this node's sessions) and the webhook
// dispatcher. On error, what it started is stopped again; Close releases
// the rest.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("start node: the node is closed")
	}
	if n.running {
		return errors.New("start node: already started")
	}
	n.running = true
	defer func() {
		if err != nil {
			_ = n.stopRunning(ctx)
		}
	}()
	if n.otlp != nil {
		x, err := otelexport.New(ctx, n.Engine, n.Store, &otelexport.Config{
			NodeID: n.NodeID, Endpoint: n.otlp.Endpoint, Protocol: n.otlp.Protocol, Logger: n.log,
		})
		if err != nil {
			return fmt.Errorf("otlp export: %w", err)
		}
		if err := x.Start(ctx); err != nil {
			return err
		}
		n.OTel = x
		where := n.otlp.Endpoint
		if where == "" {
			where = "the OTEL_EXPORTER_OTLP_* endpoint"
		}
		n.log.Info("exporting turn traces over OTLP", "endpoint", where, "protocol", n.otlp.Protocol)
	}
	if err := n.Engine.Start(ctx); err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	n.engineRunning = true
	// The requests this node's previous run died running hold their
	// Idempotency-Keys no longer: their clients' retries run at once.
	if c, err := n.Store.IdempotencyExpireOwner(ctx, n.NodeID, time.Now()); err != nil {
		return fmt.Errorf("recover idempotency claims of node %s: %w", n.NodeID, err)
	} else if c > 0 {
		n.log.Info("released the idempotency keys of this node's previous run", "requests", c)
	}
	if err := n.Webhooks.Start(ctx); err != nil {
		return err
	}
	n.webhooksRunning = true
	if n.auditRetention > 0 {
		n.auditPruner = startPruner(ctx, "the audit log", func(ctx context.Context) (int64, error) {
			return n.App.PruneAudit(ctx, n.auditRetention)
		}, n.log)
	}
	if n.idempotencyRetention > 0 {
		n.idempotencyPruner = startPruner(ctx, "idempotency keys", func(ctx context.Context) (int64, error) {
			return n.Store.IdempotencyPrune(ctx, time.Now().Add(-n.idempotencyRetention))
		}, n.log)
	}
	return nil
}

// drainContext is the context a stop runs under: never cancelled by ctx
// (a signal that cancelled it must not cut the drain short), bounded by
// ctx's deadline when it has one, else by d.
func drainContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(base, dl)
	}
	return context.WithTimeout(base, d)
}

// stopRunning stops what Start started: the engine first, so that the
// trace export and the webhooks see the turns its drain ends. The caller
// holds n.mu.
func (n *Node) stopRunning(ctx context.Context) error {
	var errs []error
	n.auditPruner.stop()
	n.idempotencyPruner.stop()
	n.auditPruner, n.idempotencyPruner = nil, nil
	if n.engineRunning {
		engCtx, cancel := drainContext(ctx, EngineDrainTimeout)
		if err := n.Engine.Stop(engCtx); err != nil {
			errs = append(errs, fmt.Errorf("stop engine: %w", err))
		}
		cancel()
		n.engineRunning = false
	}
	if n.OTel != nil {
		otelCtx, cancel := drainContext(ctx, OTelDrainTimeout)
		if err := n.OTel.Stop(otelCtx); err != nil {
			errs = append(errs, fmt.Errorf("stop otlp export: %w", err))
		}
		cancel()
		n.OTel = nil
	}
	if n.webhooksRunning {
		// Pending deliveries stay in the outbox for the next start.
		if err := n.Webhooks.Stop(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, fmt.Errorf("stop webhooks: %w", err))
		}
		n.webhooksRunning = false
	}
	n.running = false
	return errors.Join(errs...)
}

// Close stops whatever runs (running steps get until ctx's deadline, or
// EngineDrainTimeout when it has none, to reach a point where they can be
// resumed; ctx may already be cancelled, e.g. by a signal: the drain still
// runs), then closes the store and releases the data directory. It does
// not end the API's event streams: the caller shuts its listener and the
// API down first. It is safe to call more than once; later calls return
// the first result.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return n.closeErr
	}
	n.closed = true
	errs := []error{n.stopRunning(ctx)}
	if err := n.Store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close database: %w", err))
	}
	n.unlock()
	n.closeErr = errors.Join(errs...)
	return n.closeErr
}

// DefaultProviders are the model providers every node serves: the offline
// scripted one, OpenAI (Responses and Chat Completions), any
// OpenAI-compatible server (Ollama, vLLM, llama.cpp, LiteLLM) and
// Anthropic. Keys come from the environment variables agent specs name
// (api_key_env) or the vault (api_key_secret).
func DefaultProviders() map[string]model.Provider {
	return map[string]model.Provider{
		"scripted":             scripted.New(nil),
		openai.NameOpenAI:      openai.New(openai.Config{Name: openai.NameOpenAI}),
		openai.NameCompatible:  openai.New(openai.Config{Name: openai.NameCompatible}),
		anthropic.ProviderName: anthropic.New(anthropic.Config{}),
	}
}

// wakeForFreedRunner resolves the environment_connection actions of at
// most free of the sessions waiting for a runner at its capacity, one of
// whose environments just closed (the router's OnFreed).
func (n *Node) wakeForFreedRunner(project, name, keyID string, labels []string, free int) {
	if n.Engine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	woke, err := n.Engine.RunnerFreed(ctx, project, name, keyID, labels, free)
	if err != nil {
		n.log.Warn("wake the sessions waiting for a runner's slot", "runner", name, "project", project, "err", err)
	}
	if woke > 0 {
		n.log.Info("runner has a free slot: sessions waiting for it go on", "runner", name, "project", project, "sessions", woke)
	}
}

// EnsureAgent defines an agent of the server's config file (serve
// --config) through the application service, as its caller ConfigCaller:
// the operator who wrote the file.
func (n *Node) EnsureAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, bool, error) {
	return n.App.EnsureAgent(app.WithCaller(ctx, app.ConfigCaller), req)
}

// wakeForRunner resolves the environment_connection actions of the
// sessions a runner that just connected matches (the hub's OnConnect).
func (n *Node) wakeForRunner(row store.RunnerRow) {
	if n.Engine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	woke, err := n.Engine.RunnerConnected(ctx, row.Project, row.Name, row.KeyID, row.Labels)
	if err != nil {
		n.log.Warn("wake the sessions waiting for a runner", "runner", row.Name, "project", row.Project, "err", err)
	}
	if woke > 0 {
		n.log.Info("runner connected: sessions waiting for it go on", "runner", row.Name, "project", row.Project, "sessions", woke)
	}
}
