package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestBenchScenarios runs every scenario of `longhaul bench` tiny in one
// call: each prints its own table, and the runs without a scenario flag
// do not run.
func TestBenchScenarios(t *testing.T) {
	t.Parallel()
	tree := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tree, "a.txt"), []byte("a"), 0o644))
	// Four scenarios, each starting its own node: 30 s (one wait's bound)
	// was too little once on a CI machine at load 17, where the engine's
	// start timed out in the last one.
	args := []string{"bench", "--workspace", tree, "--long", "200", "--active", "3", "--model-latency", "5ms",
		"--watchers", "3", "--steps", "4", "--data", t.TempDir()}
	r := cliRunWithin(t, 5*time.Minute, args...)
	require.NoError(t, r.err, "longhaul %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	out := r.stdout
	require.NotContains(t, out, "commits/step")
	require.Regexp(t, `\(empty\)\s+0\s.*\n\s*\S+\s+1\s+0\.0\s`, out)
	require.Regexp(t, `long session steps.*\n\s+200\s+2\s`, out)
	require.Regexp(t, `active sessions.*\n\s+3\s+5ms\s+12\s`, out)
	require.Regexp(t, `watchers.*\n\s+3\s+own process\s+\d+\s+\d+\s`, out)
}

// TestBenchScenarioFlagsRefused: bad scenario values are usage errors
// naming the flag, refused before anything runs.
func TestBenchScenarioFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--long", "50"}, "--long 50: want 200 or more"},
		{[]string{"--active", "-2"}, "--active -2: want 1 or more"},
		{[]string{"--active", "2", "--model-latency", "-1s"}, "--model-latency -1s: want 0 or more"},
		{[]string{"--watchers", "-1"}, "--watchers -1: want 1 or more"},
		{[]string{"--workspace", filepath.Join(t.TempDir(), "missing")}, "is not a directory"},
		{[]string{"--watchers", "2", "--store", "postgres://x@127.0.0.1:1/x"}, "--store and --nodes do not apply to the scenarios"},
	} {
		r := cliRun(t, append([]string{"bench"}, c.args...)...)
		require.Equal(t, exitUsage, r.code, "%v: stderr: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.want, "%v", c.args)
	}
}
