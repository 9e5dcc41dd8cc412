package bench

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// BenchmarkCancelLatency cancels 20 sessions in a model call, one after
// another, and reports the time from each request to its effect in the
// journal.
func BenchmarkCancelLatency(b *testing.B) {
	benchControl(b, Config{Sessions: 20}, ControlCancel)
}

// BenchmarkSteerLatency is BenchmarkCancelLatency for a steer with
// interrupt: to the call abandoned and made again with the message.
func BenchmarkSteerLatency(b *testing.B) {
	benchControl(b, Config{Sessions: 20}, ControlSteer)
}

// BenchmarkCancelLatencyAcrossNodes is BenchmarkCancelLatency on
// PostgreSQL with two nodes, each cancel taken by the node that does not run
// the session (it needs LONGHAUL_TEST_POSTGRES).
func BenchmarkCancelLatencyAcrossNodes(b *testing.B) {
	benchControl(b, Config{StoreURL: benchPostgres(b), Nodes: 2, Sessions: 20}, ControlCancel)
}

// BenchmarkSteerLatencyAcrossNodes is BenchmarkSteerLatency on PostgreSQL
// with two nodes, as BenchmarkCancelLatencyAcrossNodes.
func BenchmarkSteerLatencyAcrossNodes(b *testing.B) {
	benchControl(b, Config{StoreURL: benchPostgres(b), Nodes: 2, Sessions: 20}, ControlSteer)
}

// benchPostgres returns the test database's URL, or skips.
func benchPostgres(b *testing.B) string {
	url := pgtest.BaseDSN(b)
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		b.Skipf("%s is not a URL; the benchmark takes postgres:// URLs only", pgtest.Env)
	}
	return url
}

func benchControl(b *testing.B, cfg Config, kind ControlKind) {
	var all []time.Duration
	for b.Loop() {
		cfg.Dir = b.TempDir()
		res, err := Control(context.Background(), cfg, kind)
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
	// Each request's answer comes before its effect, so each order
	// statistic of the answers is at most the effects' one.
	require.Positive(t, res.AnswerP50)
	require.LessOrEqual(t, res.AnswerP50, res.AnswerP99)
	require.LessOrEqual(t, res.AnswerP50, res.P50)
	require.LessOrEqual(t, res.AnswerP99, res.P99)
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
	require.Regexp(t, `control\s+sessions\s+cross-node\s+p50 answer\s+p99 answer\s+p50 to effect\s+p99 to effect\s+max`, out.String())
	require.Regexp(t, `\n\s+cancel\s+3\s+0(\s+\S+){5}\s*\n`, out.String())
}

// TestControlSteer runs the steer measurement on SQLite: every session's
// model call was abandoned for the message and made again with it (Control
// checks each journal, and that the cancel ending the run let no answer
// through).
func TestControlSteer(t *testing.T) {
	t.Parallel()
	res, err := Control(context.Background(), Config{Dir: t.TempDir(), Sessions: 3}, ControlSteer)
	require.NoError(t, err)
	requireControlResult(t, res, ControlSteer, 3, 0)
	var out strings.Builder
	PrintControl(&out, []*ControlResult{res})
	require.Regexp(t, `\n\s+steer\s+3\s+0(\s+\S+){5}\s*\n`, out.String())
}

// TestControlAcrossNodes runs both on PostgreSQL with two nodes: every
// request is taken by the node that does not run the session.
func TestControlAcrossNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.BaseDSN(t)
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		t.Skipf("%s is not a URL; the benchmark takes postgres:// URLs only", pgtest.Env)
	}
	for _, kind := range []ControlKind{ControlCancel, ControlSteer} {
		res, err := Control(context.Background(), Config{Dir: t.TempDir(), StoreURL: url, Nodes: 2, Sessions: 4}, kind)
		require.NoError(t, err, "%s", kind)
		requireControlResult(t, res, kind, 4, 4)
	}
}

// TestSteeredNeedsTheCallMadeAgain: the steer's effect is the abandoned
// call and the call made again with the message; a journal with only the
// first is not done, and one where the call answered is an error.
func TestSteeredNeedsTheCallMadeAgain(t *testing.T) {
	t.Parallel()
	ev := func(typ, data string) lt.Event { return lt.Event{Type: typ, Data: json.RawMessage(data)} }
	start := []lt.Event{ev(lt.EventModelRequested, `{"step":1}`), ev(lt.EventTurnSteered, `{"input":"x","interrupt":true}`)}
	abandoned := append(slices.Clone(start), ev(lt.EventModelFailed, `{"step":1,"interrupted":"steered"}`))

	done, err := steered("ses_1", start)
	require.NoError(t, err)
	require.False(t, done)
	done, err = steered("ses_1", abandoned)
	require.NoError(t, err)
	require.False(t, done, "abandoned, not yet made again")
	done, err = steered("ses_1", append(slices.Clone(abandoned), ev(lt.EventModelRequested, `{"step":1,"steers":1}`)))
	require.NoError(t, err)
	require.True(t, done)
	_, err = steered("ses_1", append(slices.Clone(start), ev(lt.EventModelResponded, `{"step":1}`)))
	require.ErrorContains(t, err, "did not cut the model call")
	done, err = steered("ses_1", append(slices.Clone(start), ev(lt.EventModelFailed, `{"step":1,"interrupted":"turn_timeout"}`), ev(lt.EventModelRequested, `{"step":1,"steers":1}`)))
	require.NoError(t, err)
	require.False(t, done, "a call cut by something else is not the steer's effect")
}

func TestControlRefusesAnUnknownKind(t *testing.T) {
	t.Parallel()
	_, err := Control(context.Background(), Config{Dir: t.TempDir()}, "pause")
	require.ErrorContains(t, err, `unknown control "pause"`)
}
