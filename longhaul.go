package longhaul

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/node"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Options says how to run the engine in-process. Zero fields mean the
// default named in their comment.
type Options struct {
	// DataDir holds the sessions' workspaces, this node's id, the vault's
	// key file and, without PostgresURL, the SQLite database
	// (DataDir/longhaul.db). Required; created if missing. One process at
	// a time may use it.
	DataDir string
	// PostgresURL keeps the sessions in PostgreSQL instead
	// (postgres://USER@HOST:PORT/DB?search_path=SCHEMA): every process
	// with a data directory of its own on the same schema serves the same
	// sessions, like `longhaul serve --store`. Default: SQLite in DataDir.
	PostgresURL string
	// NoMigrate refuses a schema older than this library instead of
	// migrating it at Open. Default: Open migrates.
	NoMigrate bool

	// Agents are defined at Open: each is created, or given a new version
	// when its spec differs from its latest one (see Runtime.EnsureAgent).
	// Default: none.
	Agents []lt.PutAgentRequest
	// Tools are tools written in Go (Tool), which agents enable by name
	// beside the built-ins. Default: none.
	Tools []*GoTool
	// Functions answer application function tools in-process (Function).
	// Default: none.
	Functions []*GoFunction

	// Logger receives the engine's logs. Default: slog.Default().
	Logger *slog.Logger
	// Sandbox says where the shell tool's commands run: "auto" (bubblewrap
	// when it works, else unisolated with a warning), "bwrap" (Open fails
	// without it) or "local" (no isolation). Default: "auto".
	Sandbox string
	// LeaseTTL is how long this process's lease on a running session lasts
	// unrenewed: how soon another process on the same PostgreSQL takes
	// over the sessions of one that died. Default: 30 s.
	LeaseTTL time.Duration
	// VaultKeyFile is the file holding the key of the vault of secrets.
	// Default: DataDir/vault.key, created on first use; back it up apart
	// from the database.
	VaultKeyFile string
	// APIKeys are the bearer tokens Handler accepts. Default: none, and
	// Handler answers loopback peers only.
	APIKeys []string
	// ListenAddrs are the addresses Handler is served on (a listener's
	// Addr().String(): listen before Open). No session may reach them, nor
	// the database of PostgresURL, whatever its agent lists. Default: none
	// known (the database is refused all the same).
	ListenAddrs []string
	// ModelKeyEnv are environment variables agents may name as a model's
	// api_key_env, each with the hosts its key may go to, besides
	// OPENAI_API_KEY (api.openai.com) and ANTHROPIC_API_KEY
	// (api.anthropic.com). Default: those two only.
	ModelKeyEnv map[string][]string
	// AuditRetention is how long the audit log keeps an entry; the process
	// deletes older ones at Open and every hour, as `longhaul serve
	// --audit-retention` does. Every process on a shared store prunes it,
	// so the shortest retention among them decides. Default: 90 days;
	// negative: keep every entry.
	AuditRetention time.Duration
	// IdempotencyRetention is how long the first answer to a request with
	// an Idempotency-Key (to Handler, or to a server on the same store)
	// answers its repeats, as `longhaul serve --idempotency-retention`;
	// the shortest among the processes on a shared store decides. At least
	// an hour. Default: 7 days; negative: keep every answer.
	IdempotencyRetention time.Duration
}

// subscribePoll is how often a stream of the Runtime (StreamEvents,
// StreamTreeEvents) reads its journals again without a notice of their
// growth (notices are hints that a busy process may miss): a missed one
// delays an event by that much at most. An HTTP stream reads as often as
// it pings instead.
const subscribePoll = 2 * time.Second

// asLibrary is ctx carrying the library's identity for the Service: the
// program that embeds the runtime owns it, so it calls as an admin of every
// project (app.LibraryCaller), whatever ctx carried.
func asLibrary(ctx context.Context) context.Context {
	return app.WithCaller(ctx, app.LibraryCaller)
}

// Runtime is the engine running in this process: its workers run the
// sessions, and its methods are the API's operations, in-process. Open
// one with Open and Close it when done; it is safe for concurrent use.
type Runtime struct {
	node *node.Node
	// svc is the node's application service: every API operation of the
	// Runtime is one of its methods (see api.go), called with
	// asLibrary(ctx).
	svc app.Service
	log *slog.Logger

	// cancel stops the function dispatcher; done closes when it returned.
	cancel context.CancelFunc
	done   chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Open starts the engine in this process: it opens (creating them if
// needed) the data directory and the store, migrates the store, defines
// Options.Agents, starts the workers, which resume the sessions left
// running, and starts answering the pending calls of Options.Functions.
// ctx bounds the start only.
//
// Open is wired exactly like `longhaul serve` (minus the listener: see
// Handler), so a session created in-process can be watched from the CLI or
// the web UI of a server on the same store, and the other way round.
func Open(ctx context.Context, opts Options) (_ *Runtime, err error) {
	if opts.DataDir == "" {
		return nil, errors.New("open longhaul: Options.DataDir is required")
	}
	if opts.PostgresURL != "" && !node.IsPostgresURL(opts.PostgresURL) {
		return nil, errors.New("open longhaul: Options.PostgresURL must start with postgres:// or postgresql://")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	tools, fns, err := registrations(opts)
	if err != nil {
		return nil, fmt.Errorf("open longhaul: %w", err)
	}
	n, err := node.Open(ctx, &node.Config{
		DataDir: opts.DataDir, StoreURL: opts.PostgresURL, NoMigrate: opts.NoMigrate, LeaseTTL: opts.LeaseTTL,
		APIKeys: opts.APIKeys, Logger: log, VaultKeyFile: opts.VaultKeyFile, Sandbox: opts.Sandbox, Tools: tools,
		ModelKeyEnv: opts.ModelKeyEnv, PollInterval: subscribePoll,
		AuditRetention: opts.AuditRetention, IdempotencyRetention: opts.IdempotencyRetention,
	})
	if err != nil {
		return nil, fmt.Errorf("open longhaul: %w", err)
	}
	defer func() {
		if err != nil {
			_ = n.Close(ctx)
		}
	}()
	if len(opts.ListenAddrs) > 0 {
		// Before the workers start: a session they resume must not
		// reach the API either.
		if err := n.Serving(ctx, opts.ListenAddrs...); err != nil {
			return nil, fmt.Errorf("open longhaul: Options.ListenAddrs: %w", err)
		}
	}
	rt := &Runtime{node: n, svc: n.App, log: log}
	// Defined before the workers start: a session they resume may name
	// one of these agents' latest versions.
	for i := range opts.Agents {
		if _, _, err := rt.EnsureAgent(ctx, &opts.Agents[i]); err != nil {
			return nil, fmt.Errorf("open longhaul: Options.Agents[%d]: %w", i, err)
		}
	}
	if err := n.Start(ctx); err != nil {
		return nil, fmt.Errorf("open longhaul: %w", err)
	}
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rt.cancel, rt.done = cancel, make(chan struct{})
	if len(fns) == 0 {
		close(rt.done)
	} else {
		d := newDispatcher(n.App, n.Store, fns, log)
		go func() {
			defer close(rt.done)
			d.run(dctx)
		}()
	}
	return rt, nil
}

// registrations checks the Go tools and functions and returns them as the
// engine and the dispatcher take them.
func registrations(opts Options) ([]tool.Tool, map[string]*GoFunction, error) {
	builtins := map[string]bool{}
	for _, t := range tool.Builtins() {
		builtins[t.Name()] = true
	}
	seen := map[string]string{}
	var tools []tool.Tool
	for i, t := range opts.Tools {
		field := fmt.Sprintf("Options.Tools[%d]", i)
		switch {
		case t == nil:
			return nil, nil, fmt.Errorf("%s is nil", field)
		case builtins[t.name]:
			return nil, nil, fmt.Errorf("%s: %q is the name of a built-in tool", field, t.name)
		case seen[t.name] != "":
			return nil, nil, fmt.Errorf("%s: %q is also %s", field, t.name, seen[t.name])
		}
		seen[t.name] = field
		tools = append(tools, t.impl)
	}
	fns := map[string]*GoFunction{}
	for i, f := range opts.Functions {
		field := fmt.Sprintf("Options.Functions[%d]", i)
		switch {
		case f == nil:
			return nil, nil, fmt.Errorf("%s is nil", field)
		case builtins[f.name]:
			return nil, nil, fmt.Errorf("%s: %q is the name of a built-in tool", field, f.name)
		case seen[f.name] != "":
			return nil, nil, fmt.Errorf("%s: %q is also %s", field, f.name, seen[f.name])
		}
		seen[f.name] = field
		fns[f.name] = f
	}
	return tools, fns, nil
}

// Handler is the HTTP API (API.md) of this runtime, with the web UI at /,
// /healthz, /readyz and /metrics: the handler `longhaul serve` serves.
// Mount it at the root of an http.Server to let the CLI, the web UI or
// other programs (package client) reach the sessions. It accepts
// Options.APIKeys as bearer tokens, or loopback peers only when there are
// none; then a Host header must name the server's listen address (or
// localhost on a loopback listener), and in every mode a state change from
// another site or with a body that is not application/json is refused
// (docs/api.md, "Requests from web pages"). Give the http.Server timeouts
// of its own. Close ends its open event streams; shut the http.Server down
// first.
func (rt *Runtime) Handler() http.Handler { return rt.node.API }

// NodeID names this runtime as the owner of the sessions it runs (kept in
// the data directory across restarts).
func (rt *Runtime) NodeID() string { return rt.node.NodeID }

// Close stops the runtime: function handlers get their ctx cancelled (the
// calls they did not answer stay pending, to be handed over at the next
// Open), the API's event streams end, and running steps get until ctx's
// deadline (30 s when it has none) to reach a point where they can be
// resumed; steps still running then are cut, and handled as after a crash
// at the next Open. Then the store is closed and the data directory
// released. Later calls return the first result.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.closeOnce.Do(func() {
		rt.cancel()
		<-rt.done
		rt.node.API.Shutdown()
		rt.closeErr = rt.node.Close(ctx)
		if rt.closeErr != nil {
			rt.closeErr = fmt.Errorf("close longhaul: %w", rt.closeErr)
		}
	})
	return rt.closeErr
}
