package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/bench"
)

// scenarioFlags are `longhaul bench`'s scenarios: each runs when its flag
// is given, and prints its own table.
type scenarioFlags struct {
	workspace    string
	long         int
	active       int
	modelLatency time.Duration
	watchers     int
	// watchersInProcess runs the watchers' clients in the bench's own
	// process, as the scenario did before they had one of their own.
	watchersInProcess bool
}

func (f *scenarioFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.workspace, "workspace", "", "scenario: copy this directory into a session's workspace, then take write_file and shell steps; compared with an empty workspace")
	cmd.Flags().IntVar(&f.long, "long", 0, "scenario: one session of this many steps (200 or more), compaction on, parked every 100 steps")
	cmd.Flags().IntVar(&f.active, "active", 0, "scenario: this many sessions at once against a model answering after --model-latency")
	cmd.Flags().DurationVar(&f.modelLatency, "model-latency", time.Second, "the model's latency in the --active scenario")
	cmd.Flags().IntVar(&f.watchers, "watchers", 0, "scenario: this many event-stream subscribers on one session, over loopback")
	cmd.Flags().BoolVar(&f.watchersInProcess, "watchers-in-process", false, "run the --watchers clients in the server's process instead of a process of their own")
}

func (f *scenarioFlags) any() bool {
	return f.workspace != "" || f.long != 0 || f.active != 0 || f.watchers != 0
}

// watcherClientsCommand is the hidden `longhaul bench` subcommand that runs
// the watchers scenario's clients, re-executed by the scenario.
const watcherClientsCommand = "watcher-clients"

// watcherClientsCmd is the watchers scenario's client process: the bench
// re-executes its own binary with it and drives it over stdin and stdout.
// People never run it; it is not listed in help.
func (c *cli) watcherClientsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   watcherClientsCommand,
		Short: "Run the --watchers scenario's clients (internal)",
		Long:  "Run by `longhaul bench --watchers`, never by people: read the scenario's messages on stdin, subscribe its clients, answer on stdout.",
		// What runs it, for --help (every command has an example).
		Example: "  longhaul bench --watchers 1000   # runs `longhaul bench watcher-clients` as its clients' process",
		Hidden:  true,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.ServeWatcherClients(cmd.Context(), cmd.InOrStdin(), c.stdout)
		},
	}
}

// validate refuses bad values before anything runs, naming the flag.
func (f *scenarioFlags) validate() error {
	switch {
	case f.long != 0 && f.long < 200:
		return usagef("--long %d: want 200 or more steps (two parks' worth)", f.long)
	case f.active < 0:
		return usagef("--active %d: want 1 or more sessions", f.active)
	case f.modelLatency < 0:
		return usagef("--model-latency %s: want 0 or more", f.modelLatency)
	case f.watchers < 0:
		return usagef("--watchers %d: want 1 or more subscribers", f.watchers)
	case f.watchersInProcess && f.watchers == 0:
		return usagef("--watchers-in-process needs --watchers")
	}
	if f.workspace != "" {
		info, err := os.Stat(f.workspace)
		if err != nil || !info.IsDir() {
			return usagef("--workspace: %s is not a directory", f.workspace)
		}
	}
	return nil
}

// run runs the scenarios given, in dir, with steps steps each (0: each
// one's default).
func (f *scenarioFlags) run(ctx context.Context, out io.Writer, dir string, steps int) error {
	cfg := func(name string) bench.Config {
		return bench.Config{Dir: filepath.Join(dir, name), Steps: steps}
	}
	fmt.Fprintf(out, "store: SQLite (synchronous=FULL), 1 node\n")
	if f.workspace != "" {
		runs, err := bench.WorkspacePair(ctx, cfg("workspace"), f.workspace)
		if err != nil {
			return fmt.Errorf("workspace run (%s): %w", f.workspace, err)
		}
		fmt.Fprintln(out)
		bench.PrintWorkspace(out, runs)
	}
	if f.long > 0 {
		c := cfg("long")
		c.Steps = f.long
		res, err := bench.Long(ctx, c)
		if err != nil {
			return fmt.Errorf("long run: %w", err)
		}
		fmt.Fprintln(out)
		bench.PrintLong(out, res)
	}
	if f.active > 0 {
		c := cfg("active")
		c.Sessions = f.active
		res, err := bench.Active(ctx, c, f.modelLatency)
		if err != nil {
			return fmt.Errorf("active run: %w", err)
		}
		fmt.Fprintln(out)
		bench.PrintActive(out, []*bench.ActiveResult{res})
	}
	if f.watchers > 0 {
		c := cfg("watchers")
		if !f.watchersInProcess {
			c.ClientCommand = bench.SelfClients([]string{"bench", watcherClientsCommand})
		}
		res, err := bench.Watchers(ctx, c, f.watchers)
		if err != nil {
			return fmt.Errorf("watchers run: %w", err)
		}
		fmt.Fprintln(out)
		bench.PrintWatchers(out, []*bench.WatchersResult{res})
	}
	return nil
}
