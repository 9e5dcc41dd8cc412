package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchControl runs a tiny `longhaul bench` with --control: the control
// latencies' table follows the steps' one, with a row of two cancels and
// one of two steers.
func TestBenchControl(t *testing.T) {
	t.Parallel()
	out := cliOK(t, "bench", "--steps", "2", "--rounds", "1", "--concurrent", "2", "--waiting", "0", "--control", "2", "--data", t.TempDir())
	require.Regexp(t, `(?s)agent-steps/s.*\n\n\s+control\s+sessions\s+cross-node\s+p50 answer\s+p99 answer\s+p50 to effect\s+p99 to effect\s+max\s*\n\s+cancel\s+2\s+0(\s+\S+){5}\s*\n\s+steer\s+2\s+0(\s+\S+){5}\s*\n$`, out)
}

// TestBenchControlSkipped: --control 0 skips the control run, and a
// negative count is a usage error naming the flag.
func TestBenchControlSkipped(t *testing.T) {
	t.Parallel()
	out := cliOK(t, "bench", "--steps", "2", "--rounds", "1", "--concurrent", "2", "--waiting", "0", "--control", "0", "--data", t.TempDir())
	require.NotContains(t, out, "cross-node")
	r := cliRun(t, "bench", "--control", "-1")
	require.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stderr, "--control -1: want 0 (skip) or more")
}
