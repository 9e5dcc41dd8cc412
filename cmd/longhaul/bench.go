package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/bench"
)

func (c *cli) benchCmd() *cobra.Command {
	var (
		steps, concurrent, rounds, waiting, nodes, control int
		dataDir, storeURL                                  string
		scen                                               scenarioFlags
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the engine's core loop on SQLite or PostgreSQL and print a table",
		Long: `Measure the engine on an embedded SQLite store (synchronous=FULL), or on
PostgreSQL with --store, with the scripted model and a no-op read tool, so
what is measured is Longhaul's own overhead: journal appends, projections,
leases and scheduling.

It runs one session at a time, then --concurrent sessions at once, each of
--steps agent steps (one model call and one tool call each), and prints
agent-steps/s, the per-step overhead p50/p99, store commits per step (SQLite
only: "-" on PostgreSQL) and the process RSS. Then it parks --waiting
sessions on a required action, a timer or a signal, and prints the RSS and
goroutine count they hold.

Last it puts --control sessions each in a model call that would last
minutes and cancels them one after another, and prints the latency from
the cancel request (the API's own call) to its effect in the journal (the
call abandoned, the session cancelled): p50, p99 and max. Then the same
for a steer with interrupt, to the call abandoned and made again with the
message. With --nodes 2 or more each request is taken by a node that does
not run the session, so it reaches the runner through the store's
notifier (or its poll interval).

On PostgreSQL every run uses a temporary schema of the --store database,
created and dropped again (the URL's search_path is not used), so the
benchmark never touches a deployment's tables. --nodes N runs N engines in
this process against that schema, each with its own node id, connection
pool and workspaces, as N nodes would; sessions are created on them in
turn, and any node may run any session.

Scenarios. With any of --workspace, --long, --active or --watchers, only
the scenarios given run (not the runs above), each printing its table:

--workspace DIR copies DIR into a session's workspace (its first step),
then takes --steps steps (30 unless given), write_file and shell in turn,
each checkpointed; and the same in an empty workspace. The two sessions
run in one server in turn, two steps at a time, so that the machine's
drift weighs on both alike. It prints each kind of step's p50 cost, the
first snapshot's time (of the tree just copied) and the later snapshots'
p50, and the write_file steps' ratio to the empty workspace's.

--long N runs one session of N steps (at least 200) with compaction on (a
small context window) and parked every 100 steps (its turn ends; the next
message resumes it from the store). It prints the cost of each fifth of
the steps, the last fifth's ratio to the first, and the time from the
message that resumes the session to its first model call: the median and
the 99th percentile (of five, the slowest) of the first five parks and of
the last five. Last, the process's CPU time over the first fifth's turns
and over the last fifth's, and their ratio, which other work on the
machine bends far less than the wall times.

--active N runs N sessions of --steps steps at once against a model that
answers each call after --model-latency, with a worker per session and a
server's poll interval (the engine's default), and prints agent-steps/s
(at most N / latency; the sessions' creations are in the elapsed time),
the peak RSS and the peak goroutine count. A second table gives the time
the creations took, a step's period (from one of a session's model
requests to its next, read from the journal, and its excess over the
latency), the rate the sessions sustain at their periods, the process's
CPU time and its CPU and heap allocations per step, the commits per step
and the share of the time the SQLite writer was busy.

--watchers N runs a node's HTTP API on loopback, subscribes N Go clients
to one session's event stream, runs a turn of --steps steps (20 unless
given) and prints each event's latency from its append to each
subscriber reading it: p50, p99 and max, and the median latency to the
first subscriber that read each event (the path from the append to the
stream, without the fan-out). The clients run in a process of their own
(this binary, re-executed), so that the server's CPU per delivered event
is counted apart from theirs; latencies compare the event's append time
with the client's read time, both from the machine's wall clock.
--watchers-in-process runs them in the server's process instead.

The scenarios run on SQLite (--store and --nodes are not used).`,
		Example: `  longhaul bench
  longhaul bench --concurrent 64 --steps 10 --waiting 10000
  longhaul bench --store 'postgres://postgres@127.0.0.1:5432/bench' --nodes 3
  longhaul bench --control 200 --waiting 0 --store 'postgres://postgres@127.0.0.1:5432/bench' --nodes 2
  longhaul bench --workspace ~/src/go
  longhaul bench --long 10000
  longhaul bench --active 1000 --model-latency 1s
  longhaul bench --watchers 1000`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if storeURL != "" && !isPostgresURL(storeURL) {
				return usagef("--store: want a postgres:// or postgresql:// URL (the value is not shown: it may hold a password)")
			}
			if nodes < 1 {
				return usagef("--nodes %d: want 1 or more", nodes)
			}
			if control < 0 {
				return usagef("--control %d: want 0 (skip) or more", control)
			}
			if err := scen.validate(); err != nil {
				return err
			}
			if nodes > 1 && storeURL == "" {
				return usagef("--nodes %d needs --store: SQLite serves one node", nodes)
			}
			dir := dataDir
			if dir == "" {
				tmp, err := os.MkdirTemp("", "longhaul-bench-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			}
			ctx := cmd.Context()
			if scen.any() {
				if storeURL != "" || nodes > 1 {
					return usagef("--store and --nodes do not apply to the scenarios (--workspace, --long, --active, --watchers): they run on SQLite")
				}
				if !cmd.Flags().Changed("steps") {
					steps = 0 // each scenario's own default
				}
				return scen.run(ctx, cmd.OutOrStdout(), dir, steps)
			}
			base := bench.Config{StoreURL: storeURL, Nodes: nodes, Steps: steps}
			run := func(name string, sessions, rounds int) (*bench.Result, error) {
				cfg := base
				cfg.Dir, cfg.Sessions, cfg.Rounds = filepath.Join(dir, name), sessions, rounds
				return bench.Run(ctx, cfg)
			}
			serial, err := run("serial", 1, rounds)
			if err != nil {
				return unreachableStore(fmt.Errorf("serial run: %w", err))
			}
			par, err := run("concurrent", concurrent, 2)
			if err != nil {
				return fmt.Errorf("concurrent run: %w", err)
			}
			var wait *bench.WaitResult
			if waiting > 0 {
				cfg := base
				cfg.Dir, cfg.Sessions = filepath.Join(dir, "waiting"), waiting
				if wait, err = bench.Waiting(ctx, cfg); err != nil {
					return fmt.Errorf("waiting run: %w", err)
				}
			}
			var controls []*bench.ControlResult
			kinds := []bench.ControlKind{bench.ControlCancel, bench.ControlSteer}
			if control == 0 {
				kinds = nil
			}
			for _, kind := range kinds {
				cfg := base
				cfg.Dir, cfg.Sessions = filepath.Join(dir, "control-"+string(kind)), control
				res, err := bench.Control(ctx, cfg, kind)
				if err != nil {
					return fmt.Errorf("control run (%s): %w", kind, err)
				}
				controls = append(controls, res)
			}
			where := "SQLite (synchronous=FULL), 1 node"
			if storeURL != "" {
				where = fmt.Sprintf("PostgreSQL (a temporary schema of the --store database), %s", plural(nodes, "node"))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "store: %s\n\n", where)
			bench.Print(cmd.OutOrStdout(), []*bench.Result{serial, par}, wait)
			if len(controls) > 0 {
				fmt.Fprintln(cmd.OutOrStdout())
				bench.PrintControl(cmd.OutOrStdout(), controls)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&steps, "steps", 10, "agent steps per session")
	cmd.Flags().IntVar(&concurrent, "concurrent", 64, "sessions run at once in the concurrent run")
	cmd.Flags().IntVar(&rounds, "rounds", 30, "sessions run one after another in the serial run")
	cmd.Flags().IntVar(&waiting, "waiting", 10000, "sessions parked on a required action, a timer or a signal (0: skip)")
	cmd.Flags().IntVar(&control, "control", 50, "sessions cancelled, and as many steered with interrupt, in a model call, to measure the latency from request to effect (0: skip)")
	cmd.Flags().StringVar(&dataDir, "data", "", "directory for the SQLite databases and the workspaces (default: a temporary one, removed afterwards)")
	cmd.Flags().StringVar(&storeURL, "store", "", "run on PostgreSQL: a postgres:// URL of a database the benchmark may create a schema in")
	scen.register(cmd)
	cmd.AddCommand(c.watcherClientsCmd())
	cmd.Flags().IntVar(&nodes, "nodes", 1, "engines run against the store, as that many nodes (more than 1 needs --store)")
	return cmd
}
