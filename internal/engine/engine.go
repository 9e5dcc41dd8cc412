package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// DefaultMaxWorkers is Config.MaxWorkers's default.
const DefaultMaxWorkers = 32

// Config configures an Engine. A nil *Config means all defaults, which only
// suits tests: WorkspaceRoot is required.
type Config struct {
	// WorkspaceRoot is the directory holding one workspace per session. Required.
	WorkspaceRoot string
	// NodeID names this node as the owner of its leases. Keep it stable across
	// restarts of one node (cmd derives it from the data directory), so a
	// restarted node resumes its own sessions at once. Default: random.
	NodeID string
	// Providers maps a model.provider name to its implementation. Default: none
	// (every session is refused naming agent_spec.model.provider).
	Providers map[string]model.Provider
	// Tools are the built-in tools agents may enable. Default: tool.Builtins().
	Tools []tool.Tool
	// Clock is the source of time. Default: the system clock.
	Clock Clock
	// Logger receives operational logs. Default: slog.Default().
	Logger *slog.Logger
	// MaxWorkers bounds concurrently running sessions. Default:
	// DefaultMaxWorkers.
	MaxWorkers int
	// LeaseTTL is how long a lease lasts without renewal. Default: 30 s.
	LeaseTTL time.Duration
	// PollInterval is how often the scheduler looks for work it was not told
	// about (expired leases of dead nodes). Default: 1 s.
	PollInterval time.Duration
	// ModelTimeout bounds one model call. Default: 10 min. A provider's
	// HTTP client may cut a call sooner (model.HTTPClient waits 10 minutes
	// for response headers); a call any timeout cut once its request was
	// written counts its input, and one cut before (still dialling) does
	// not.
	ModelTimeout time.Duration
	// MaxModelAttempts bounds attempts of one model call. Default: 5.
	MaxModelAttempts int
	// MaxStepsPerTurn is used when an agent sets no max_steps. Default: 100.
	MaxStepsPerTurn int
	// MaxArtifactBytes bounds one artifact. Default: 32 MiB.
	MaxArtifactBytes int64
	// BlobThreshold is the event payload size above which the payload is
	// stored as a content-addressed blob. Default: 64 KiB.
	BlobThreshold int
	// LookupEnv reads the server's environment variables that model specs
	// name for their API keys (api_key_env). Default: os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// ModelKeyEnv lists the environment variables a model spec may name in
	// api_key_env, each with the hosts its key may be sent to (as a vault
	// secret's hosts: names, "*.example.com", IP addresses, each with an
	// optional port). A variable not listed is refused, set or not; a
	// LONGHAUL_ variable cannot be listed. Default (nil):
	// DefaultModelKeyEnv, OPENAI_API_KEY for api.openai.com and
	// ANTHROPIC_API_KEY for api.anthropic.com.
	ModelKeyEnv map[string][]string
	// ControlPlane holds the server's own addresses (its nodes' API
	// listeners, its database), which no session may reach: the egress
	// proxy and http_request refuse them whatever an agent lists, and a
	// model's base_url may not be one. The node fills it as it learns them
	// (its listener is bound after New). Default: none.
	ControlPlane *egress.ControlPlane
	// Sandbox runs the programs of tools (shell). Default: none, and
	// programs run as plain subprocesses in the workspace (tests,
	// embedding); cmd wires sandbox.Detect.
	Sandbox sandbox.Backend
	// BrowserMemory bounds each session's browser, in bytes (see
	// internal/browser's memory.go). Default: browser.DefaultMemoryBytes.
	BrowserMemory int64
	// OnSecretsChanged is called (after the vault's cache is dropped) when
	// secrets change, e.g. to refresh the redactor of the server's logs.
	OnSecretsChanged func()
	// SandboxWarning is what the sandbox's detection said, shown in /readyz.
	SandboxWarning string
	// Vault resolves agents' secrets. Default: none (an agent naming
	// secrets is refused).
	Vault Vault
	// FreeSpace checks the data volume's free space: nil when there is
	// enough, else an error wrapping store.ErrStorageFull whose message
	// says what is nearly full (freespace.Monitor.Check). Below the floor
	// the engine claims no session, creates none (507), and /readyz is
	// 503; a session whose write failed for want of space waits until it
	// returns nil. Default: none (no floor; a full disk is still noticed
	// by the writes that fail).
	FreeSpace func() error
	// RuntimeDir holds the sockets of the sessions' egress proxies (0700).
	// Default: "run" beside WorkspaceRoot.
	RuntimeDir string
	// Workspaces holds this node's copies of the workspaces, under
	// WorkspaceRoot; the Environments backend must use the same Manager.
	// Default: a new one over WorkspaceRoot.
	Workspaces *workspace.Manager
	// SnapshotCache makes the workspaces' snapshots incremental; it must
	// have been made for the store the engine is given, and is shared with
	// the Environments backend; give it records for
	// snapshot.RecordsFor(MaxWorkers) workspaces. The engine closes it on
	// Stop. Default: a new one, watching the workspaces when Sandbox is
	// bwrap.
	SnapshotCache *snapshot.Cache
	// Environments opens the sessions' environments: where their
	// programs run, their files are read and written and their snapshots
	// are taken (docs/dev/environments.md). Default: the local backend
	// (environment.NewLocal) over Sandbox (sandbox.NewLocal when nil),
	// Workspaces, the store, SnapshotCache and RuntimeDir.
	Environments environment.Backend
	// DataDir is the server's data directory: the trajectory monitor
	// reads a call naming it (outside WorkspaceRoot, the sessions' own) as
	// a probe for secrets. Default: "" (not checked).
	DataDir string

	// createJoinWait overrides createJoinWait (tests:
	// SetCreateJoinWaitForTest); 0 keeps it.
	createJoinWait time.Duration
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.WorkspaceRoot == "" {
		return out, errors.New("engine config: WorkspaceRoot is required")
	}
	if out.NodeID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		out.NodeID = "node-" + hex.EncodeToString(b[:])
	}
	if out.Tools == nil {
		out.Tools = tool.Builtins()
	}
	if out.Clock == nil {
		out.Clock = realClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.MaxWorkers <= 0 {
		out.MaxWorkers = DefaultMaxWorkers
	}
	if out.LeaseTTL <= 0 {
		out.LeaseTTL = 30 * time.Second
	}
	if out.PollInterval <= 0 {
		out.PollInterval = time.Second
	}
	if out.ModelTimeout <= 0 {
		out.ModelTimeout = 10 * time.Minute
	}
	if out.MaxModelAttempts <= 0 {
		out.MaxModelAttempts = 5
	}
	if out.MaxStepsPerTurn <= 0 {
		out.MaxStepsPerTurn = 100
	}
	if out.MaxArtifactBytes <= 0 {
		out.MaxArtifactBytes = 32 << 20
	}
	if out.BlobThreshold <= 0 {
		out.BlobThreshold = 64 << 10
	}
	if out.LookupEnv == nil {
		out.LookupEnv = os.LookupEnv
	}
	if out.ModelKeyEnv == nil {
		out.ModelKeyEnv = DefaultModelKeyEnv()
	}
	keyEnv, err := normalizeModelKeyEnv(out.ModelKeyEnv)
	if err != nil {
		return out, err
	}
	out.ModelKeyEnv = keyEnv
	if out.RuntimeDir == "" {
		out.RuntimeDir = filepath.Join(filepath.Dir(filepath.Clean(out.WorkspaceRoot)), "run")
	}
	return out, nil
}

// Engine runs sessions. Create it with New, then Start it; Stop drains it.
type Engine struct {
	store  store.Store
	cfg    Config
	log    *slog.Logger
	clock  Clock
	tools  *tool.Registry
	spaces *workspace.Manager
	hub    *hub
	// waiters spares RunnerFreed its store read when no session of the
	// project waits for a runner (slotwaiters.go).
	waiters slotWaiters
	// snapshots caches what the workspace snapshots already stored.
	snapshots *snapshot.Cache
	// sockets names the egress proxies' Unix sockets (of the default
	// local environments).
	sockets *proxySockets
	// envs opens the sessions' environments (Config.Environments).
	envs environment.Backend
	// copies queues the sessions whose workspace copy on this node may
	// be stale after another node stopped their environment
	// (stalecopies.go).
	copies *staleCopies
	// background waits for the engine's goroutines other than the
	// scheduler (discardStaleCopies).
	background sync.WaitGroup
	// wsLocks keeps a person's change of a workspace and this node's
	// runner of the session apart (workspacesync.go).
	wsLocks workspaceLocks
	// personOpens counts the environments people's requests of this node
	// hold open, which an idle stop waits for (personopens.go).
	personOpens personOpens

	mu       sync.Mutex
	draining bool
	cancel   context.CancelCauseFunc
	done     chan struct{}
	slots    chan struct{}
	wake     chan struct{}
	// handoff carries the sessions created here with a lease
	// (createSession) to the scheduler, each holding a slot.
	handoff chan job
	// backlog is set while runnable sessions may be waiting for a worker
	// here (a claim filled every slot it asked for, or a session was
	// created with no slot free), and cleared once a claim returns fewer
	// sessions than it asked for (none waits). While it is set, a session
	// created here is queued like the others instead of taking a slot
	// that frees ahead of the scheduler's claim: the oldest run first.
	backlog atomic.Bool
	// monSecrets is the trajectory monitor's index of the vault's values.
	monSecrets monitorSecrets
}

// New returns an engine over st. It does not start workers: call Start.
func New(st store.Store, cfg *Config) (*Engine, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	spaces := c.Workspaces
	if spaces == nil {
		if spaces, err = workspace.New(c.WorkspaceRoot); err != nil {
			return nil, fmt.Errorf("open workspaces: %w", err)
		}
	}
	e := &Engine{
		store: st, cfg: c, log: c.Logger, clock: c.Clock, spaces: spaces,
		tools:   tool.NewRegistry(c.Tools...),
		slots:   make(chan struct{}, c.MaxWorkers),
		handoff: make(chan job, c.MaxWorkers),
		wake:    make(chan struct{}, 1),
		sockets: &proxySockets{dir: c.RuntimeDir},
	}
	e.hub = newHub(st)
	e.copies = newStaleCopies()
	e.hub.onEvents = e.copies.notice
	e.hub.onActionRaised = e.waiters.raisedElsewhere
	// Unchanged files are not read again by the next checkpoint, and, with
	// the bwrap sandbox, the workspaces are watched so a shell step's
	// checkpoint reads only what the command changed (snapshotwrites.go).
	// The watches are trusted only where commands cannot make hard links
	// (the sandbox's seccomp filter denies them): a write through a link
	// the command then removed is reported under the removed name only.
	// Without the sandbox, every checkpoint after a command walks, but
	// that of a workspace still empty (watched while it is: nothing in it
	// has another name), as after a tool of the embedder's that wrote
	// nothing.
	if e.snapshots = c.SnapshotCache; e.snapshots == nil {
		watch := c.Sandbox != nil && c.Sandbox.Name() == "bwrap"
		if e.snapshots, err = snapshot.NewCache(st, &snapshot.CacheConfig{
			Watch: watch, WatchEmptyRoots: true, MaxRecords: snapshot.RecordsFor(c.MaxWorkers),
		}); err != nil {
			return nil, fmt.Errorf("snapshot cache: %w", err)
		}
	}
	if e.envs = c.Environments; e.envs == nil {
		sb := c.Sandbox
		if sb == nil {
			// Programs run as plain subprocesses then (see runsPrograms),
			// but an MCP stdio server still needs a backend to start in.
			sb = sandbox.NewLocal()
		}
		e.envs, err = environment.NewLocal(&environment.LocalConfig{
			Sandbox: sb, Workspaces: spaces, Blobs: st, Owners: st, Cache: e.snapshots, SocketPath: e.sockets.path, Logger: c.Logger,
		})
		if err != nil {
			return nil, err
		}
	}
	if v := c.Vault; v != nil {
		e.hub.onSecrets = func() {
			v.Invalidate()
			if c.OnSecretsChanged != nil {
				c.OnSecretsChanged()
			}
		}
	}
	return e, nil
}

// ReadyDetails reports operational facts for /readyz: which sandbox runs
// the tools' programs, and the warning when it isolates nothing.
func (e *Engine) ReadyDetails() map[string]string {
	d := map[string]string{"sandbox": "none (plain subprocesses)"}
	if e.runsPrograms() {
		d["sandbox"] = e.envs.Name()
	}
	if e.cfg.SandboxWarning != "" {
		d["sandbox_warning"] = e.cfg.SandboxWarning
	}
	return d
}

// checkSpace is Config.FreeSpace, or nil without one.
func (e *Engine) checkSpace() error {
	if e.cfg.FreeSpace == nil {
		return nil
	}
	return e.cfg.FreeSpace()
}

// refuseWhenLow is the 507 of a request that would create work while the
// data volume is below its floor: the work could not be journaled for long.
func (e *Engine) refuseWhenLow() error {
	if err := e.checkSpace(); err != nil {
		return apierror.InsufficientStorage(err, "%v; no new work is accepted until space is freed", err)
	}
	return nil
}

// NodeID is the owner name of this engine's leases.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// Start expires the leases of this node's previous incarnation and starts the
// scheduler. It returns once the scheduler runs.
func (e *Engine) Start(ctx context.Context) error {
	n, err := e.store.LeaseExpireOwner(ctx, e.cfg.NodeID, e.clock.Now())
	if err != nil {
		return fmt.Errorf("recover leases of node %s: %w", e.cfg.NodeID, err)
	}
	if n > 0 {
		e.log.Info("resuming sessions of this node's previous run", "sessions", n)
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	e.mu.Lock()
	e.cancel = cancel
	e.done = make(chan struct{})
	e.mu.Unlock()
	e.hub.start(runCtx)
	e.background.Go(func() { e.discardStaleCopies(runCtx) })
	go func() {
		defer close(e.done)
		e.schedule(runCtx)
	}()
	return nil
}

var errShutdown = errors.New("engine shutting down")

// Stop drains the engine: no new session is claimed, each running session
// finishes its current step and gives its lease back (it stays runnable, so
// the next start or another node resumes it). When ctx ends first, running
// steps are cancelled: their effects stay in the ledger as started, which a
// resume handles like a crash.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if e.cancel == nil {
		e.mu.Unlock()
		return nil
	}
	e.draining = true
	cancel, done := e.cancel, e.done
	e.mu.Unlock()
	e.kick()
	select {
	case <-done:
	case <-ctx.Done():
	}
	cancel(errShutdown)
	<-done
	e.background.Wait()
	e.hub.stop()
	e.sockets.close()
	return e.snapshots.Close() // the workspaces' watches
}

func (e *Engine) isDraining() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.draining
}

// kick wakes the scheduler without blocking.
func (e *Engine) kick() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}
