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
		steps, concurrent, rounds, waiting int
		dataDir                            string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the engine's core loop on SQLite and print a table",
		Long: `Measure the engine on an embedded SQLite store (synchronous=FULL) with the
scripted model and a no-op read tool, so what is measured is Longhaul's own
overhead: journal appends, projections, leases and scheduling.

It runs one session at a time, then --concurrent sessions at once, each of
--steps agent steps (one model call and one tool call each), and prints
agent-steps/s, the per-step overhead p50/p99, store commits per step and the
process RSS. Then it parks --waiting sessions on a required action and prints
the RSS and goroutine count they hold.`,
		Example: `  longhaul bench
  longhaul bench --concurrent 64 --steps 10 --waiting 10000`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			serial, err := bench.Run(ctx, bench.Config{Dir: filepath.Join(dir, "serial"), Sessions: 1, Steps: steps, Rounds: rounds})
			if err != nil {
				return fmt.Errorf("serial run: %w", err)
			}
			par, err := bench.Run(ctx, bench.Config{Dir: filepath.Join(dir, "concurrent"), Sessions: concurrent, Steps: steps, Rounds: 2})
			if err != nil {
				return fmt.Errorf("concurrent run: %w", err)
			}
			var wait *bench.WaitResult
			if waiting > 0 {
				if wait, err = bench.Waiting(ctx, filepath.Join(dir, "waiting"), waiting); err != nil {
					return fmt.Errorf("waiting run: %w", err)
				}
			}
			bench.Print(cmd.OutOrStdout(), []*bench.Result{serial, par}, wait)
			return nil
		},
	}
	cmd.Flags().IntVar(&steps, "steps", 10, "agent steps per session")
	cmd.Flags().IntVar(&concurrent, "concurrent", 64, "sessions run at once in the concurrent run")
	cmd.Flags().IntVar(&rounds, "rounds", 30, "sessions run one after another in the serial run")
	cmd.Flags().IntVar(&waiting, "waiting", 10000, "sessions parked on a required action (0: skip)")
	cmd.Flags().StringVar(&dataDir, "data", "", "directory for the databases (default: a temporary one, removed afterwards)")
	return cmd
}
