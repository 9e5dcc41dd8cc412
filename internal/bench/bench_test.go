package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// BenchmarkSerial runs one session of 10 agent steps at a time.
func BenchmarkSerial(b *testing.B) {
	benchSessions(b, 1)
}

// BenchmarkConcurrent64 runs 64 sessions of 10 agent steps concurrently.
func BenchmarkConcurrent64(b *testing.B) {
	benchSessions(b, 64)
}

// BenchmarkSerialRounds runs 30 sessions of 10 agent steps one at a time
// in one store: its CPU profile shows what a step costs, the store's
// opening and migrations (most of BenchmarkSerial's profile) spread over
// 300 steps. Its allocs/op divided by 300 is the allocations per step.
func BenchmarkSerialRounds(b *testing.B) {
	benchSessionsRounds(b, 1, 30)
}

func benchSessions(b *testing.B, sessions int) {
	benchSessionsRounds(b, sessions, 1)
}

func benchSessionsRounds(b *testing.B, sessions, rounds int) {
	var steps int
	var commits float64
	cpu0 := cpuTime()
	for b.Loop() {
		res, err := Run(context.Background(), Config{Dir: b.TempDir(), Sessions: sessions, Steps: 10, Rounds: rounds})
		if err != nil {
			b.Fatal(err)
		}
		steps += res.Steps
		commits += res.CommitsPerStep * float64(res.Steps)
	}
	// The process's CPU, user and system, per step: what a step costs
	// whatever else loads the machine (the rate depends on that), the
	// store's opening and migrations included.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(steps), "cpu-µs/step")
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "agent-steps/s")
	b.ReportMetric(commits/float64(steps), "commits/step")
}

// TestRunSmoke checks that a small run completes and measures what it says.
func TestRunSmoke(t *testing.T) {
	res, err := Run(context.Background(), Config{Dir: t.TempDir(), Sessions: 4, Steps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 12 || res.Sessions != 4 {
		t.Fatalf("ran %d sessions, %d steps; want 4, 12", res.Sessions, res.Steps)
	}
	if res.CommitsPerStep <= 0 || res.CommitsPerStep > 3 {
		t.Fatalf("commits per step = %.2f, want in (0, 3]", res.CommitsPerStep)
	}
	w, err := Waiting(context.Background(), Config{Dir: t.TempDir(), Sessions: 50})
	if err != nil {
		t.Fatal(err)
	}
	if w.Sessions != 50 {
		t.Fatalf("waiting sessions = %d, want 50", w.Sessions)
	}
	if w.GoroutinesAfter > w.GoroutinesBefore+10 {
		t.Fatalf("goroutines grew from %d to %d with 50 waiting sessions: waiting must hold none", w.GoroutinesBefore, w.GoroutinesAfter)
	}
}

// TestRunOnPostgresThreeNodes runs the benchmark on PostgreSQL with three
// engines sharing one schema: every session completes whichever node
// claims it, and the table says commits are not counted there.
func TestRunOnPostgresThreeNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.BaseDSN(t)
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		t.Skipf("%s is not a URL; the benchmark takes postgres:// URLs only", pgtest.Env)
	}
	ctx := context.Background()
	res, err := Run(ctx, Config{Dir: t.TempDir(), StoreURL: url, Nodes: 3, Sessions: 6, Steps: 3})
	require.NoError(t, err)
	require.Equal(t, 6, res.Sessions)
	require.Equal(t, 18, res.Steps)
	require.True(t, math.IsNaN(res.CommitsPerStep))
	w, err := Waiting(ctx, Config{Dir: t.TempDir(), StoreURL: url, Nodes: 3, Sessions: 12})
	require.NoError(t, err)
	require.Equal(t, 12, w.Sessions)
	var out strings.Builder
	Print(&out, []*Result{res}, w)
	require.Regexp(t, `\n\s+6\s+18\s+\d+\s+\S+\s+\S+\s+-\s+[\d.]+\s+\n`, out.String())
	require.Contains(t, out.String(), "12 sessions waiting")
}

func TestConfigRefusesNodesWithoutPostgres(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), Config{Dir: t.TempDir(), Nodes: 3})
	require.ErrorContains(t, err, "Nodes 3 needs StoreURL")
	_, err = Run(context.Background(), Config{Dir: t.TempDir(), StoreURL: "mysql://x"})
	require.ErrorContains(t, err, "postgres:// or postgresql://")
	// Nothing listens on port 1: the run fails cleanly, naming the step.
	_, err = Run(context.Background(), Config{Dir: t.TempDir(), StoreURL: "postgres://nobody@127.0.0.1:1/x?pool_max_conns=2"})
	require.ErrorContains(t, err, "bench: connect to PostgreSQL")
}

// BenchmarkWatchers1000 runs the watchers scenario with 1,000 subscribers,
// their clients in a process of their own: a CPU profile of it shows the
// server's side of the event stream's fan-out alone.
func BenchmarkWatchers1000(b *testing.B) {
	var p99, cpu time.Duration
	runs := 0
	for b.Loop() {
		res, err := Watchers(context.Background(), Config{Dir: b.TempDir(), ClientCommand: testClients}, 1000)
		if err != nil {
			b.Fatal(err)
		}
		p99 += res.P99
		cpu += res.CPUPerDelivery
		runs++
	}
	b.ReportMetric(float64(p99.Milliseconds())/float64(runs), "p99-ms")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(runs), "server-cpu-ns/delivery")
}

// BenchmarkActive1000 runs the active scenario at its goal's size: 1,000
// sessions of 10 steps against a model answering after 1 s.
func BenchmarkActive1000(b *testing.B) {
	var rate float64
	runs := 0
	for b.Loop() {
		res, err := Active(context.Background(), Config{Dir: b.TempDir(), Sessions: 1000, Steps: 10}, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		rate += res.StepsPerSecond
		runs++
	}
	b.ReportMetric(rate/float64(runs), "agent-steps/s")
}

// TestWaitReadsTheSessionOnce: the harness's wait for a session's end reads
// its status once, when it starts, and then takes it from the notices of
// the session's appends, not from a read of its row at each one (as a peer
// awaits its workflow's result in process).
func TestWaitReadsTheSessionOnce(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Dir: t.TempDir()}
	require.NoError(t, cfg.validate())
	r, err := open(ctx, cfg, 4)
	require.NoError(t, err)
	defer r.close()
	const steps = 30
	spec := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: stepsScript(steps)},
		Tools: []lt.ToolSpec{{Name: "noop"}}, MaxSteps: steps + 1,
	}
	ids, err := createSessions(ctx, r, 1, spec, "benchmark")
	require.NoError(t, err)
	node := r.nodes[0]
	var read []lt.SessionStatus
	// No fallback within the test: every read is the wait's own choice.
	err = waitStatus(ctx, node.eng, ids, time.Hour, func(id string) (lt.SessionStatus, error) {
		row, err := node.st.SessionGet(ctx, id)
		if err != nil {
			return "", err
		}
		read = append(read, lt.SessionStatus(row.Status))
		return lt.SessionStatus(row.Status), nil
	})
	require.NoError(t, err)
	row, err := node.st.SessionGet(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, string(lt.SessionIdle), row.Status)
	require.Len(t, read, 1, "reads of the session's status while it ran %d steps", steps)
	require.NotEqual(t, lt.SessionIdle, read[0], "the wait began before the session ended")
}
