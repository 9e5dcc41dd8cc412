package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Config sets the size of a run and where it runs.
type Config struct {
	// Dir holds the SQLite database and the workspaces. Required.
	Dir string
	// StoreURL, when set, is a postgres:// URL: the run uses a temporary
	// schema of that database (created, then dropped) instead of SQLite.
	// Default: SQLite in Dir.
	StoreURL string
	// Nodes is the number of engines run against the store, each with its
	// own node id, store connection pool and workspaces, as separate nodes
	// would; sessions are created on them in turn. More than one needs
	// StoreURL. Default: 1.
	Nodes int
	// Sessions run concurrently. Default: 1.
	Sessions int
	// Steps is the number of agent steps per session (one model call and one
	// no-op read tool call each). Default: 10.
	Steps int
	// Rounds repeats the batch of sessions to gather enough samples. Default: 1.
	Rounds int
	// Workers is each engine's worker pool size. Default: max(Sessions, 32).
	Workers int
	// ClientCommand, for the watchers run only, makes the command that
	// runs the subscribers in a process of their own: a binary that runs
	// ServeWatcherClients on its standard input and output (SelfClients
	// re-executes the running one). Nil: the subscribers run in the
	// run's own process, on the server's Go runtime.
	ClientCommand func(context.Context) *exec.Cmd
}

func (c *Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("bench: Dir is required")
	case c.Nodes < 0:
		return fmt.Errorf("bench: Nodes must not be negative, got %d", c.Nodes)
	case c.Nodes > 1 && c.StoreURL == "":
		return fmt.Errorf("bench: Nodes %d needs StoreURL: SQLite serves one node", c.Nodes)
	case c.StoreURL != "" && !strings.HasPrefix(c.StoreURL, "postgres://") && !strings.HasPrefix(c.StoreURL, "postgresql://"):
		return errors.New("bench: StoreURL must be a postgres:// or postgresql:// URL")
	}
	c.Nodes = max(c.Nodes, 1)
	return nil
}

// Result is one measured run.
type Result struct {
	Sessions       int
	Steps          int // agent steps completed in total
	Elapsed        time.Duration
	StepsPerSecond float64
	P50, P99       time.Duration // per-step overhead
	// CommitsPerStep is the store's committed write transactions per step;
	// NaN when the driver does not count them (PostgreSQL).
	CommitsPerStep float64
	RSSBytes       int64
}

// noop is a read-only tool that does nothing: the benchmark measures the
// engine, not a tool. It never touches the workspace and says so, as an
// application's tool that calls a service does (longhaul.WithoutWorkspace).
type noop struct{}

func (noop) Name() string                { return "noop" }
func (noop) Description() string         { return "Does nothing." }
func (noop) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (noop) Effect() lt.EffectClass      { return lt.EffectRead }
func (noop) WorkspaceFree() bool         { return true }
func (noop) Run(context.Context, *tool.Call) (*tool.Result, error) {
	return &tool.Result{Output: "ok"}, nil
}

// rig is the store and the engines of one run.
type rig struct {
	nodes []rigNode
	// sqlite is the store when the run is on SQLite (it counts commits).
	sqlite *sqlite.Store
	// drop removes the run's PostgreSQL schema.
	drop func()
}

type rigNode struct {
	st  store.Store
	eng *engine.Engine
}

// rigExtras are what a scenario adds to every engine of its rig: a model
// provider of its own (the scenarios' bench model) and tools.
type rigExtras struct {
	providers map[string]model.Provider
	tools     []tool.Tool
	// sandbox runs the shell tool (default: none, plain subprocesses).
	sandbox sandbox.Backend
	// serverPoll runs the engines with the poll interval a server has
	// (the engine's default) rather than the rig's short one.
	serverPoll bool
}

func open(ctx context.Context, cfg Config, workers int) (*rig, error) {
	return openWith(ctx, cfg, workers, rigExtras{})
}

func openWith(ctx context.Context, cfg Config, workers int, extras rigExtras) (_ *rig, err error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	r := &rig{drop: func() {}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	dsn := ""
	if cfg.StoreURL != "" {
		var drop func()
		if dsn, drop, err = tempSchema(ctx, cfg.StoreURL); err != nil {
			return nil, err
		}
		r.drop = drop
	}
	for i := range cfg.Nodes {
		var st store.Store
		if dsn == "" {
			s, err := sqlite.Open(ctx, filepath.Join(cfg.Dir, "bench.db"), nil)
			if err != nil {
				return nil, err
			}
			r.sqlite, st = s, s
		} else {
			s, err := postgres.Open(ctx, dsn, nil)
			if err != nil {
				return nil, err
			}
			st = s
		}
		r.nodes = append(r.nodes, rigNode{st: st})
		if i == 0 {
			if err := st.Migrate(ctx); err != nil {
				return nil, err
			}
		}
		providers := map[string]model.Provider{"scripted": scripted.New(nil)}
		maps.Copy(providers, extras.providers)
		poll := 50 * time.Millisecond
		if extras.serverPoll {
			poll = 0
		}
		eng, err := engine.New(st, &engine.Config{
			WorkspaceRoot: filepath.Join(cfg.Dir, fmt.Sprintf("node-%d", i), "workspaces"),
			NodeID:        fmt.Sprintf("bench-node-%d", i),
			Providers:     providers,
			Tools:         append(append(tool.Builtins(), noop{}), extras.tools...),
			MaxWorkers:    workers,
			Sandbox:       extras.sandbox,
			PollInterval:  poll,
			Logger:        slog.New(slog.DiscardHandler),
		})
		if err != nil {
			return nil, err
		}
		if err := eng.Start(ctx); err != nil {
			return nil, err
		}
		r.nodes[i].eng = eng
	}
	return r, nil
}

// tempSchema creates a schema of its own for a run in the database that
// base names, and returns base with its search_path set to it, and a
// function that drops it.
func tempSchema(ctx context.Context, base string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, errors.New("bench: the store URL cannot be parsed (it is not shown, as it may hold a password)")
	}
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	schema := "longhaul_bench_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{schema}.Sanitize()
	// pgxpool's parser takes the pool's own settings (pool_max_conns...)
	// out of the URL; the rest configures one plain connection.
	pcfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		return "", nil, errors.New("bench: the store URL cannot be parsed (it is not shown, as it may hold a password)")
	}
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.ConnectConfig(ctx, pcfg.ConnConfig.Copy())
		if err != nil {
			return fmt.Errorf("bench: connect to PostgreSQL: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("bench: %s: %w", sql, err)
		}
		return nil
	}
	if err := exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = exec(ctx, "DROP SCHEMA "+ident+" CASCADE")
	}
	return u.String(), drop, nil
}

func (r *rig) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range r.nodes {
		if n.eng != nil {
			_ = n.eng.Stop(ctx)
		}
	}
	for _, n := range r.nodes {
		_ = n.st.Close()
	}
	r.drop()
}

// sqliteStats returns the SQLite store's counters, or nil on another
// driver.
func (r *rig) sqliteStats() *sqlite.Stats {
	if r.sqlite == nil {
		return nil
	}
	st := r.sqlite.Stats()
	return &st
}

// commits returns the store's commit count, or -1 when it has none.
func (r *rig) commits() int64 {
	if r.sqlite == nil {
		return -1
	}
	return r.sqlite.Stats().Commits
}

func stepsScript(steps int) json.RawMessage {
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < steps-1; i++ {
		// Distinct arguments: the same call in a row is a loop the engine stops.
		fmt.Fprintf(&b, `{"tool_calls":[{"name":"noop","arguments":{"i":%d}}],"usage":{"input_tokens":100,"output_tokens":10}},`, i)
	}
	b.WriteString(`{"text":"done","usage":{"input_tokens":100,"output_tokens":10}}]`)
	return json.RawMessage(b.String())
}

// Run measures cfg.Sessions concurrent sessions of cfg.Steps steps each.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Sessions = max(cfg.Sessions, 1)
	if cfg.Steps <= 0 {
		cfg.Steps = 10
	}
	cfg.Rounds = max(cfg.Rounds, 1)
	if cfg.Workers <= 0 {
		cfg.Workers = max(cfg.Sessions, 32)
	}
	r, err := open(ctx, cfg, cfg.Workers)
	if err != nil {
		return nil, err
	}
	defer r.close()
	spec := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: stepsScript(cfg.Steps)},
		Tools: []lt.ToolSpec{{Name: "noop"}}, MaxSteps: cfg.Steps + 1,
	}
	commits0 := r.commits()
	var ids []string
	start := time.Now()
	for round := 0; round < cfg.Rounds; round++ {
		// Sessions are created concurrently, as independent clients would,
		// on the nodes in turn.
		batch, err := createSessions(ctx, r, cfg.Sessions, spec, "benchmark")
		if err != nil {
			return nil, err
		}
		if err := waitIdleRows(ctx, r.nodes[0], batch); err != nil {
			return nil, err
		}
		ids = append(ids, batch...)
	}
	elapsed := time.Since(start)
	commits := r.commits() - commits0
	gaps, err := stepGaps(ctx, r.nodes[0].eng, ids)
	if err != nil {
		return nil, err
	}
	total := len(ids) * cfg.Steps
	res := &Result{
		Sessions: len(ids), Steps: total, Elapsed: elapsed,
		StepsPerSecond: float64(total) / elapsed.Seconds(),
		CommitsPerStep: math.NaN(),
		RSSBytes:       rss(),
	}
	if commits0 >= 0 {
		res.CommitsPerStep = float64(commits) / float64(total)
	}
	res.P50, res.P99 = percentile(gaps, 0.50), percentile(gaps, 0.99)
	return res, nil
}

// waitIdle waits for each session to be idle, woken by its journal's
// growth rather than polling the store every moment (which would load the
// database the benchmark measures, as a peer awaiting a workflow's result
// in process does not); the poll interval is the fallback for a missed
// notification.
func waitIdle(ctx context.Context, eng *engine.Engine, ids []string) error {
	return waitStatus(ctx, eng, ids, waitFallback, func(id string) (lt.SessionStatus, error) {
		s, err := eng.GetSession(ctx, id)
		if err != nil {
			return "", err
		}
		return s.Status, nil
	})
}

// waitIdleRows is waitIdle reading the session's row, whose status the
// engine writes with every append, rather than the session through the
// engine, which decodes its whole state each time: in the runs that measure
// the cost of a step that was about a tenth of the process's CPU, the
// harness's cost, not the engine's (a peer awaits its workflow's result in
// process).
func waitIdleRows(ctx context.Context, node rigNode, ids []string) error {
	return waitStatus(ctx, node.eng, ids, waitFallback, func(id string) (lt.SessionStatus, error) {
		row, err := node.st.SessionGet(ctx, id)
		if err != nil {
			return "", err
		}
		return lt.SessionStatus(row.Status), nil
	})
}

// waitFallback is how long a wait for a session's status goes without a
// notice before it reads the status (notices are hints).
const waitFallback = 20 * time.Millisecond

// waitStatus waits, as waitIdle, with status reading a session's status:
// once when it starts (the session may be idle already), then only when a
// notice does not say the status (one from another node) or none came for
// fallback.
func waitStatus(ctx context.Context, eng *engine.Engine, ids []string, fallback time.Duration, status func(id string) (lt.SessionStatus, error)) error {
	for _, id := range ids {
		grew, stop := eng.WatchSessionGrowth(ctx, id)
		err := func() error {
			defer stop()
			s, err := status(id)
			var heard int64 // the highest seq a notice said
			for {
				if err != nil {
					return err
				}
				if s == lt.SessionIdle {
					return nil
				}
				if s == lt.SessionFailed || s == lt.SessionCancelled {
					return fmt.Errorf("session %s ended %s", id, s)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case g := <-grew:
					if g.Seq < heard {
						continue // older than what a notice said already
					}
					heard = g.Seq
					if g.Status != "" {
						s = g.Status
						continue
					}
					s, err = status(id)
				case <-time.After(fallback):
					s, err = status(id)
				}
			}
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// stepGaps returns, for every step, the time from its model request to the
// next step's (or to the turn's end): the engine's whole per-step cost,
// since the scripted model and the no-op tool take no time of their own.
func stepGaps(ctx context.Context, eng *engine.Engine, ids []string) ([]time.Duration, error) {
	var out []time.Duration
	for _, id := range ids {
		evs, err := eng.ListEvents(ctx, id, 0, 10000)
		if err != nil {
			return nil, err
		}
		var last time.Time
		for _, ev := range evs {
			if ev.Type != lt.EventModelRequested && ev.Type != lt.EventTurnCompleted {
				continue
			}
			if !last.IsZero() {
				out = append(out, ev.Time.Sub(last))
			}
			last = ev.Time
		}
	}
	return out, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// WaitResult is the memory held by sessions waiting on a required action,
// a timer or a signal.
type WaitResult struct {
	Sessions         int
	RSSBytes         int64 // whole process, after GC
	GoroutinesBefore int
	GoroutinesAfter  int
}

// Waiting creates cfg.Sessions sessions that each stop on a function_call
// action, a timer or a signal, waits until all wait, and reports the
// process's RSS and goroutine count: waiting sessions must hold no goroutine
// (DESIGN.md principle 7). Steps and Rounds are not used.
func Waiting(ctx context.Context, cfg Config) (*WaitResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := max(cfg.Sessions, 1)
	r, err := open(ctx, cfg, 32)
	if err != nil {
		return nil, err
	}
	defer r.close()
	before := runtime.NumGoroutine()
	// A third wait on a required action, a third on a day-long timer, a
	// third on a signal that never comes: all three are rows, not work.
	specs := []*lt.AgentSpec{{
		Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"tool_calls":[{"name":"approve_refund","arguments":{"amount":10}}]},{"text":"done"}]`)},
		Tools: []lt.ToolSpec{{Name: "approve_refund", Type: "function"}},
	}, {
		Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"tool_calls":[{"name":"sleep","arguments":{"seconds":86400}}]},{"text":"done"}]`)},
		Tools: []lt.ToolSpec{{Name: "sleep"}},
	}, {
		Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"tool_calls":[{"name":"wait_for_signal","arguments":{"name":"go"}}]},{"text":"done"}]`)},
		Tools: []lt.ToolSpec{{Name: "wait_for_signal"}},
	}}
	ids := make([]string, 0, n)
	reserved := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if reserved >= n {
					mu.Unlock()
					return
				}
				spec, eng := specs[reserved%len(specs)], r.nodes[reserved%len(r.nodes)].eng
				reserved++
				mu.Unlock()
				s, err := eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec, Input: "refund"})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				ids = append(ids, s.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	for _, id := range ids {
		for {
			s, err := r.nodes[0].eng.GetSession(ctx, id)
			if err != nil {
				return nil, err
			}
			if s.Status == lt.SessionRequiresAction || s.Status == lt.SessionWaiting {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	// Measure what the waiting sessions hold, not garbage the runtime has
	// not returned to the OS yet.
	debug.FreeOSMemory()
	return &WaitResult{Sessions: len(ids), RSSBytes: rss(), GoroutinesBefore: before, GoroutinesAfter: runtime.NumGoroutine()}, nil
}

// rss returns the process's resident set size (Linux), or 0.
func rss() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// Print writes the report table.
func Print(w io.Writer, runs []*Result, wait *WaitResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sessions\tsteps\tagent-steps/s\tp50 step\tp99 step\tcommits/step\tRSS MiB\t")
	for _, r := range runs {
		commits := "-" // not counted by this driver
		if !math.IsNaN(r.CommitsPerStep) {
			commits = fmt.Sprintf("%.2f", r.CommitsPerStep)
		}
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%s\t%s\t%s\t%.1f\t\n", r.Sessions, r.Steps, r.StepsPerSecond,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), commits, float64(r.RSSBytes)/(1<<20))
	}
	tw.Flush()
	if wait != nil {
		fmt.Fprintf(w, "\n%d sessions waiting (on a required action, a timer or a signal): RSS %.1f MiB, goroutines %d before, %d after\n",
			wait.Sessions, float64(wait.RSSBytes)/(1<<20), wait.GoroutinesBefore, wait.GoroutinesAfter)
	}
}
