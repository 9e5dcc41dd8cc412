package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestActiveTiny runs the active scenario tiny: every session's steps
// complete, the model's latency bounds the rate from above, and the table
// has its row.
func TestActiveTiny(t *testing.T) {
	t.Parallel()
	const latency = 20 * time.Millisecond
	res, err := Active(context.Background(), Config{Dir: t.TempDir(), Sessions: 8, Steps: 3}, latency)
	require.NoError(t, err)
	require.Equal(t, 8, res.Sessions)
	require.Equal(t, 24, res.Steps)
	// Each session makes its 3 calls one after another, each taking the
	// latency at least: no run can be faster.
	require.GreaterOrEqual(t, res.Elapsed, 3*latency)
	// A step's period holds the model's latency, so the sessions' rates
	// add up to at most sessions / latency, and a run that counted a
	// session's steps in a window that cuts its first or last (the
	// measure before this one) would be under it for no cost of the
	// engine's.
	require.GreaterOrEqual(t, res.StepPeriod, latency)
	require.Greater(t, res.SteadyStepsPerSecond, 0.0)
	require.LessOrEqual(t, res.SteadyStepsPerSecond, 8/latency.Seconds())
	require.Positive(t, res.PeakRSSBytes)
	require.GreaterOrEqual(t, res.PeakGoroutines, res.GoroutinesBefore)
	var out strings.Builder
	PrintActive(&out, []*ActiveResult{res})
	require.Regexp(t, `active sessions.*\n\s+8\s+20ms\s+24\s`, out.String())
	require.Regexp(t, `step period.*\n.*\d+(\.\d+)?ms \(\+`, out.String())
	// Two workers for eight sessions run them in turn: no rate of them
	// all at once is claimed.
	res, err = Active(context.Background(), Config{Dir: t.TempDir(), Sessions: 8, Steps: 3, Workers: 2}, latency)
	require.NoError(t, err)
	require.Zero(t, res.SteadyStepsPerSecond)
	_, err = Active(context.Background(), Config{Dir: t.TempDir()}, -time.Second)
	require.ErrorContains(t, err, "model latency must not be negative")
}

// TestLongTiny runs the long scenario at its smallest: the session is
// parked and resumed, compacts, and every fifth of it has a cost.
func TestLongTiny(t *testing.T) {
	t.Parallel()
	res, err := Long(context.Background(), Config{Dir: t.TempDir(), Steps: 300})
	require.NoError(t, err)
	require.Equal(t, 300, res.Steps)
	require.Equal(t, 3, res.Turns)
	require.Positive(t, res.Compactions, "the small context window makes the session compact")
	for i, f := range res.Fifths {
		require.Positive(t, f, "fifth %d", i+1)
	}
	require.Positive(t, res.ResumeFirst)
	require.Positive(t, res.ResumeLast)
	if runtime.GOOS == "linux" {
		require.Positive(t, res.CPUFifths[0], "a turn of 100 steps takes CPU time")
	}
	var out strings.Builder
	PrintLong(&out, res)
	require.Regexp(t, `long session steps.*\n\s+300\s+3\s+\d+\s`, out.String())
	_, err = Long(context.Background(), Config{Dir: t.TempDir(), Steps: 150})
	require.ErrorContains(t, err, "at least 200 steps")
}

// TestWorkspaceTiny runs the workspace scenario tiny, empty and with a
// small tree: the tree is copied into the workspace (the first snapshot
// holds its files), and both kinds of steps are measured.
func TestWorkspaceTiny(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	empty, err := Workspace(ctx, Config{Dir: t.TempDir(), Steps: 4}, "")
	require.NoError(t, err)
	require.Zero(t, empty.Files)
	tree := smallTree(t)
	dir := t.TempDir()
	full, err := Workspace(ctx, Config{Dir: dir, Steps: 4, Sessions: 2}, tree)
	require.NoError(t, err)
	// Each session's workspace holds the tree and what its steps wrote.
	logs, err := filepath.Glob(filepath.Join(dir, "node-0", "workspaces", "*", "bench", "log.txt"))
	require.NoError(t, err)
	require.Len(t, logs, 2)
	for _, log := range logs {
		got, err := os.ReadFile(log)
		require.NoError(t, err)
		require.Equal(t, "2\n4\n", string(got), "the shell steps' appends")
		ws := filepath.Dir(filepath.Dir(log))
		require.FileExists(t, filepath.Join(ws, "bench", "w3.txt"))
		require.FileExists(t, filepath.Join(ws, "d", "1", "19"))
	}
	require.Equal(t, 20, full.Files)
	require.Equal(t, int64(20*len("content")), full.Bytes)
	for _, r := range []*WorkspaceResult{empty, full} {
		require.Positive(t, r.FirstSnapshot)
		require.Positive(t, r.WriteP50)
		require.Positive(t, r.ShellP50)
	}
	var out strings.Builder
	PrintWorkspace(&out, []*WorkspaceResult{empty, full})
	require.Regexp(t, `\(empty\)\s+0\s+0\.0\s.*1\.00×\s*\n.*\s+20\s+0\.0\s`, out.String())
	_, err = Workspace(ctx, Config{Dir: t.TempDir()}, filepath.Join(tree, "missing"))
	require.ErrorContains(t, err, "the workspace tree")
}

// TestWorkspacePairTiny runs the paired workspace scenario tiny: one
// session's workspace gets the tree and the other's stays empty, both
// take their measured steps, and they take them in turn, two at a time:
// no measured step of one overlaps one of the other's.
func TestWorkspacePairTiny(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tree := smallTree(t)
	dir := t.TempDir()
	runs, err := WorkspacePair(ctx, Config{Dir: dir, Steps: 6}, tree)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	empty, full := runs[0], runs[1]
	require.Zero(t, empty.Files)
	require.Equal(t, "", empty.Tree)
	require.Equal(t, 20, full.Files)
	require.Equal(t, tree, full.Tree)
	for _, r := range runs {
		require.Positive(t, r.FirstSnapshot)
		require.Positive(t, r.WriteP50)
		require.Positive(t, r.ShellP50)
	}

	logs, err := filepath.Glob(filepath.Join(dir, "node-0", "workspaces", "*", "bench", "log.txt"))
	require.NoError(t, err)
	require.Len(t, logs, 2)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "bench.db"), nil)
	require.NoError(t, err)
	defer st.Close()
	type span struct{ from, to time.Time }
	steps := map[string][]span{}
	trees := 0
	for _, log := range logs {
		got, err := os.ReadFile(log)
		require.NoError(t, err)
		ws := filepath.Dir(filepath.Dir(log))
		require.FileExists(t, filepath.Join(ws, "bench", "w7.txt"))
		tag := "e" // each session writes bytes of its own
		if _, err := os.Stat(filepath.Join(ws, "d", "1", "19")); err == nil {
			trees, tag = trees+1, "t"
		}
		require.Equal(t, tag+"2\n"+tag+"5\n"+tag+"8\n", string(got), "the shell steps' appends, at positions 2, 5 and 8")
		id := filepath.Base(ws)
		evs, err := st.EventList(ctx, id, 0, 1000)
		require.NoError(t, err)
		position := -1
		var from time.Time
		for _, ev := range evs {
			if ev.Type != lt.EventModelRequested && ev.Type != lt.EventTurnCompleted {
				continue
			}
			if pairKind(6)(position) != "" {
				steps[id] = append(steps[id], span{from, ev.Time})
			}
			var d lt.ModelRequestedData
			if ev.Type == lt.EventModelRequested {
				require.NoError(t, json.Unmarshal(ev.Data, &d))
			}
			position, from = d.Position, ev.Time
		}
		require.Len(t, steps[id], 6, "session %s", id)
	}
	require.Equal(t, 1, trees, "one workspace holds the tree")
	var ids []string
	for id := range steps {
		ids = append(ids, id)
	}
	for _, a := range steps[ids[0]] {
		for _, b := range steps[ids[1]] {
			require.False(t, a.from.Before(b.to) && b.from.Before(a.to), "measured steps of the two sessions overlap: %v and %v", a, b)
		}
	}
	_, err = WorkspacePair(ctx, Config{Dir: t.TempDir()}, filepath.Join(tree, "missing"))
	require.ErrorContains(t, err, "the workspace tree")

	// A session that fails (here the tree's, out of steps) never passes its
	// turn: the run ends with its error rather than waiting for the turn.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = workspacePair(ctx, Config{Dir: t.TempDir(), Steps: 6}, tree, func(input string, spec *lt.AgentSpec) {
		if input == pairTree {
			spec.MaxSteps = 2
		}
	})
	require.ErrorContains(t, err, "failed")
	require.NoError(t, ctx.Err(), "ended by the failure, not by the deadline")
}

// smallTree makes a tree of 20 files of "content" in three directories,
// d/0 to d/2 (file 19 in d/1).
func smallTree(t *testing.T) string {
	t.Helper()
	tree := t.TempDir()
	for i := range 20 {
		require.NoError(t, os.MkdirAll(filepath.Join(tree, "d", strconv.Itoa(i%3)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(tree, "d", strconv.Itoa(i%3), strconv.Itoa(i)), []byte("content"), 0o644))
	}
	return tree
}

// TestWatchersTiny runs the watchers scenario tiny, its clients in this
// process and in one of their own: every subscriber reads every event of
// the turn, in order, over a real node's API.
func TestWatchersTiny(t *testing.T) {
	t.Parallel()
	t.Run("own process", func(t *testing.T) {
		t.Parallel()
		res, err := Watchers(context.Background(), Config{Dir: t.TempDir(), Steps: 3, ClientCommand: testClients}, 5)
		require.NoError(t, err)
		require.True(t, res.Separate)
		require.Equal(t, 5*res.Events, res.Samples)
		require.Positive(t, res.P50)
		var out strings.Builder
		PrintWatchers(&out, []*WatchersResult{res})
		require.Regexp(t, `watchers.*\n\s+5\s+own process\s+\d+\s+\d+\s`, out.String())
	})
	res, err := Watchers(context.Background(), Config{Dir: t.TempDir(), Steps: 3}, 5)
	require.NoError(t, err)
	require.Equal(t, 5, res.Watchers)
	require.False(t, res.Separate)
	require.Greater(t, res.Events, 3*2, "each step journals several events")
	require.Equal(t, 5*res.Events, res.Samples)
	require.Positive(t, res.P50)
	require.GreaterOrEqual(t, res.Max, res.P99)
	require.Positive(t, res.FirstP50)
	require.LessOrEqual(t, res.FirstP50, res.Max, "the first read of an event is no later than the last")
	var out strings.Builder
	PrintWatchers(&out, []*WatchersResult{res})
	require.Regexp(t, `watchers.*\n\s+5\s+in-process\s+\d+\s+\d+\s`, out.String())
	_, err = Watchers(context.Background(), Config{Dir: t.TempDir()}, 0)
	require.ErrorContains(t, err, "watchers must be 1 or more")
}
