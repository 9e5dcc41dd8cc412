package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	require.Positive(t, res.PeakRSSBytes)
	require.GreaterOrEqual(t, res.PeakGoroutines, res.GoroutinesBefore)
	var out strings.Builder
	PrintActive(&out, []*ActiveResult{res})
	require.Regexp(t, `active sessions.*\n\s+8\s+20ms\s+24\s`, out.String())
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
	var out strings.Builder
	PrintLong(&out, res)
	require.Regexp(t, `long session steps.*\n\s+300\s+3\s+\d+\s`, out.String())
	_, err = Long(context.Background(), Config{Dir: t.TempDir(), Steps: 150})
	require.ErrorContains(t, err, "at least 200 steps")
}
