package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/anthropic"
	"github.com/longhaul-dev/longhaul/internal/model/openai"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/otelexport"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	"github.com/longhaul-dev/longhaul/internal/vault"
	"github.com/longhaul-dev/longhaul/internal/webhook"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// This file wires one server node in this process: the SQLite store in a
// data directory, the engine, the HTTP API and its listener. `serve` runs
// one until a signal; `demo` runs one on a free port when no server is given.
// It is the only place of the CLI that imports a storage driver.

// Layout of a data directory.
const (
	dbFile        = "longhaul.db"
	workspacesDir = "workspaces"
	nodeIDFile    = "node-id"
	lockFile      = "lock"
)

// Drain timeouts: how long open requests may take to finish once the
// listener is closed, and how long running steps may take to reach a point
// where they can be resumed.
const (
	httpDrainTimeout   = 10 * time.Second
	engineDrainTimeout = 30 * time.Second
)

// nodeConfig says how to run a node.
type nodeConfig struct {
	addr    string
	dataDir string
	apiKeys []string
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
}

// node is a running server node.
type node struct {
	url     string // base URL of the API, e.g. http://127.0.0.1:8080
	addr    net.Addr
	dataDir string // absolute
	nodeID  string
	agents  []agentRegistration

	log     *slog.Logger
	store   *sqlite.Store
	vault   *vault.Vault
	sandbox string // the sandbox backend: bwrap or local
	engine  *engine.Engine
	// webhooks sends outgoing webhooks.
	webhooks *webhook.Dispatcher
	// otel exports turn traces over OTLP (nil: off).
	otel   *otelexport.Exporter
	http   *http.Server
	served chan error // the result of http.Server.Serve
	unlock func()
}

// webhookAPI names webhook.API apart from vault.API where both are
// embedded in the server's backend.
type webhookAPI = webhook.API

// agentRegistration reports what start-up did with one configured agent.
type agentRegistration struct {
	name    string
	version int
	created bool
}

// startNode opens (creating if needed) the data directory, migrates the
// database, registers the configured agents, starts the engine and serves
// the API on cfg.addr. On error, everything it started is stopped again.
func startNode(ctx context.Context, cfg nodeConfig) (_ *node, err error) {
	log := cfg.logger
	srvCfg := &server.Config{APIKeys: cfg.apiKeys, Logger: log, PingInterval: cfg.pingInterval}
	if err := srvCfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.dataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %q: %w", cfg.dataDir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	n := &node{dataDir: dir, log: log, served: make(chan error, 1)}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	if n.unlock, err = lockDataDir(dir); err != nil {
		return nil, err
	}
	undo = append(undo, n.unlock)
	if n.nodeID, err = loadNodeID(dir); err != nil {
		return nil, err
	}

	if n.store, err = sqlite.Open(ctx, filepath.Join(dir, dbFile), &sqlite.Config{Logger: log}); err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = n.store.Close() })
	if err := n.store.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", filepath.Join(dir, dbFile), err)
	}

	// The vault: its key comes from LONGHAUL_VAULT_KEY or a key file in the
	// data directory; it must decrypt what is stored, or nothing could be
	// redacted and the node refuses to start.
	keyFile := cfg.vaultKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(dir, vault.DefaultKeyFile)
	}
	key, err := vault.LoadKey(cfg.vaultKeyEnv, keyFile)
	if err != nil {
		return nil, fmt.Errorf("vault key: %w", err)
	}
	_ = os.Unsetenv(vault.KeyEnv) // no child process inherits it
	if n.vault, err = vault.Open(n.store, key, nil); err != nil {
		return nil, fmt.Errorf("open the vault: %w", err)
	}
	if err := n.vault.Check(ctx); err != nil {
		return nil, fmt.Errorf("the vault key does not decrypt the stored secrets: %w", err)
	}
	refreshRedactor := func() {
		if cfg.redactor == nil {
			return
		}
		r, err := n.vault.Redactor(context.WithoutCancel(ctx))
		if err != nil {
			log.Error("load secrets for log redaction", "err", err)
			return
		}
		cfg.redactor.Store(r)
	}
	refreshRedactor()
	sb, warning := sandbox.Detect(ctx, sandbox.DetectOptions{Local: cfg.sandbox == "local"})
	if cfg.sandbox == "bwrap" && sb.Name() != "bwrap" {
		return nil, fmt.Errorf("--sandbox bwrap: %s", warning)
	}
	if cfg.sandbox == "local" {
		warning = "sandbox: the local backend was chosen (--sandbox local): shell commands are not isolated"
	}
	if warning != "" {
		log.Warn(warning)
	}
	n.sandbox = sb.Name()
	n.engine, err = engine.New(n.store, &engine.Config{
		WorkspaceRoot:    filepath.Join(dir, workspacesDir),
		RuntimeDir:       filepath.Join(dir, "run"),
		NodeID:           n.nodeID,
		Providers:        providers(),
		Logger:           log,
		Sandbox:          sb,
		SandboxWarning:   warning,
		OnSecretsChanged: refreshRedactor,
		Vault:            n.vault,
	})
	if err != nil {
		return nil, fmt.Errorf("create engine: %w", err)
	}
	if cfg.config != nil {
		if n.agents, err = registerAgents(ctx, n.engine, cfg.config); err != nil {
			return nil, err
		}
	}
	// Listen before the engine starts, so that a busy port fails the start
	// before any session is touched.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	undo = append(undo, func() { _ = ln.Close() })
	// The exporter follows journals from before the engine runs, so no
	// turn this node ends is missed.
	if n.otel, err = startOTLP(ctx, n, cfg.otlp, log); err != nil {
		return nil, err
	}
	if n.otel != nil {
		undo = append(undo, func() { _ = n.otel.Stop(context.WithoutCancel(ctx)) })
	}

	if err := n.engine.Start(ctx); err != nil {
		return nil, fmt.Errorf("start engine: %w", err)
	}
	undo = append(undo, func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engineDrainTimeout)
		defer cancel()
		_ = n.engine.Stop(stopCtx)
	})

	var webhookPorts []int // nil: the dispatcher's default, 80 and 443
	if len(cfg.webhookAllowPorts) > 0 {
		webhookPorts = append(slices.Clone(egress.DefaultPorts), cfg.webhookAllowPorts...)
	}
	if n.webhooks, err = webhook.New(n.store, &webhook.Config{AllowPrivate: cfg.webhookAllowPrivate, Ports: webhookPorts, Logger: log}); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if err := n.webhooks.Start(ctx); err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = n.webhooks.Stop(context.WithoutCancel(ctx)) })

	n.addr = ln.Addr()
	n.url = "http://" + ln.Addr().String()
	api := server.New(struct {
		*engine.Engine
		*vault.API
		*webhookAPI
	}{n.engine, vault.NewAPI(n.vault), webhook.NewAPI(n.webhooks)}, n.store, srvCfg)
	n.http = &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Event streams stay open until their client leaves; Shutdown ends them
	// so that http.Server.Shutdown is not held open by them.
	n.http.RegisterOnShutdown(api.Shutdown)
	go func() { n.served <- n.http.Serve(ln) }()
	log.Info("serving", "addr", n.addr.String(), "data", dir, "node", n.nodeID)
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

	engCtx, cancel := context.WithTimeout(ctx, engineDrainTimeout)
	if err := n.engine.Stop(engCtx); err != nil {
		errs = append(errs, fmt.Errorf("stop engine: %w", err))
	}
	cancel()

	// After the engine: turns that ended during the drain are exported.
	if n.otel != nil {
		otelCtx, cancel := context.WithTimeout(ctx, httpDrainTimeout)
		if err := n.otel.Stop(otelCtx); err != nil {
			errs = append(errs, fmt.Errorf("stop otlp export: %w", err))
		}
		cancel()
	}
	// Pending deliveries stay in the outbox for the next start.
	if err := n.webhooks.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop webhooks: %w", err))
	}
	if err := n.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close database: %w", err))
	}
	n.unlock()
	n.log.Info("stopped")
	return errors.Join(errs...)
}

// registerAgents puts every agent of the config file whose spec differs from
// its latest version. A refusal names the file, the line and the field.
func registerAgents(ctx context.Context, eng *engine.Engine, cf *configFile) ([]agentRegistration, error) {
	isNotFound := func(err error) bool {
		var ae *apierror.Error
		return errors.As(err, &ae) && ae.Code == lt.CodeNotFound
	}
	out := make([]agentRegistration, 0, len(cf.Agents))
	for i := range cf.Agents {
		req := &cf.Agents[i]
		a, created, err := putAgentIfChanged(ctx, eng, isNotFound, req)
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
		out = append(out, agentRegistration{name: a.Name, version: a.Version, created: created})
	}
	return out, nil
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// loadNodeID returns the node id kept in the data directory, creating a
// random one the first time. A stable id lets a restarted node take back its
// own sessions at once instead of waiting for their leases to expire.
func loadNodeID(dir string) (string, error) {
	p := filepath.Join(dir, nodeIDFile)
	data, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(data))
		if !nodeIDPattern.MatchString(id) {
			return "", fmt.Errorf("node id file %s: %q is not a valid node id (letters, digits, '.', '_', '-'); delete the file to get a new one", p, id)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read node id: %w", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := "node-" + hex.EncodeToString(b[:])
	// Written to a temporary file and renamed, so a crash cannot leave a
	// half-written id behind.
	tmp, err := os.CreateTemp(dir, nodeIDFile+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create node id: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(id + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write node id: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write node id: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	return id, nil
}

// providers are the model providers every node serves: the offline scripted
// one, OpenAI (Responses and Chat Completions), any OpenAI-compatible
// server (Ollama, vLLM, llama.cpp, LiteLLM) and Anthropic. Keys come from
// the environment variables agent specs name (api_key_env).
func providers() map[string]model.Provider {
	return map[string]model.Provider{
		"scripted":             scripted.New(nil),
		openai.NameOpenAI:      openai.New(openai.Config{Name: openai.NameOpenAI}),
		openai.NameCompatible:  openai.New(openai.Config{Name: openai.NameCompatible}),
		anthropic.ProviderName: anthropic.New(anthropic.Config{}),
	}
}
