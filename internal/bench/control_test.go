package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
)

// BenchmarkCancelLatency cancels 20 sessions in a model call, one after
// another, and reports the time from each request to its effect in the
// journal.
func BenchmarkCancelLatency(b *testing.B) {
	var all []time.Duration
	for b.Loop() {
		res, err := Control(context.Background(), Config{Dir: b.TempDir(), Sessions: 20}, ControlCancel)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, res.Latencies...)
	}
	reportLatencies(b, all)
}

// BenchmarkCancelLatencyAcrossNodes is BenchmarkCancelLatency on
// PostgreSQL with two nodes, each cancel taken by the node that does not run
// the session (it needs LONGHAUL_TEST_POSTGRES).
func BenchmarkCancelLatencyAcrossNodes(b *testing.B) {
	url := pgtest.BaseDSN(b)
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		b.Skipf("%s is not a URL; the benchmark takes postgres:// URLs only", pgtest.Env)
	}
	var all []time.Duration
	for b.Loop() {
		res, err := Control(context.Background(), Config{Dir: b.TempDir(), StoreURL: url, Nodes: 2, Sessions: 20}, ControlCancel)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, res.Latencies...)
	}
	reportLatencies(b, all)
}

func reportLatencies(b *testing.B, all []time.Duration) {
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(all, 0.99)), "p99-ms")
	b.ReportMetric(ms(all[len(all)-1]), "max-ms")
}

// requireControlResult checks a control run's structure (not its timing):
// one latency per session, each positive, and ordered percentiles.
func requireControlResult(t *testing.T, res *ControlResult, kind ControlKind, sessions, crossNode int) {
	t.Helper()
	require.Equal(t, kind, res.Kind)
	require.Equal(t, sessions, res.Sessions)
	require.Equal(t, crossNode, res.CrossNode)
	require.Len(t, res.Latencies, sessions)
	for _, l := range res.Latencies {
		require.Positive(t, l)
		require.LessOrEqual(t, l, res.Max)
	}
	require.Positive(t, res.P50)
	require.LessOrEqual(t, res.P50, res.P99)
	require.LessOrEqual(t, res.P99, res.Max)
	require.Contains(t, res.Latencies, res.Max)
}

// TestControlCancel runs the cancel measurement on SQLite: every session's
// model call was cut by its cancel (Control checks each journal), and the
// table has the run's row.
func TestControlCancel(t *testing.T) {
	t.Parallel()
	res, err := Control(context.Background(), Config{Dir: t.TempDir(), Sessions: 3}, ControlCancel)
	require.NoError(t, err)
	requireControlResult(t, res, ControlCancel, 3, 0)
	var out strings.Builder
	PrintControl(&out, []*ControlResult{res})
	require.Regexp(t, `control\s+sessions\s+cross-node\s+p50 to effect\s+p99 to effect\s+max`, out.String())
	require.Regexp(t, `\n\s+cancel\s+3\s+0\s+\S+\s+\S+\s+\S+\s*\n`, out.String())
}

// TestControlCancelAcrossNodes runs it on PostgreSQL with two nodes: every
// request is taken by the node that does not run the session.
func TestControlCancelAcrossNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.BaseDSN(t)
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		t.Skipf("%s is not a URL; the benchmark takes postgres:// URLs only", pgtest.Env)
	}
	res, err := Control(context.Background(), Config{Dir: t.TempDir(), StoreURL: url, Nodes: 2, Sessions: 4}, ControlCancel)
	require.NoError(t, err)
	requireControlResult(t, res, ControlCancel, 4, 4)
}

func TestControlRefusesAnUnknownKind(t *testing.T) {
	t.Parallel()
	_, err := Control(context.Background(), Config{Dir: t.TempDir()}, "pause")
	require.ErrorContains(t, err, `unknown control "pause"`)
}
