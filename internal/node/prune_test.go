package node

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPrunerTicks: the pruner prunes at start and on every tick, a
// failure waits for the next tick, and stop ends its goroutine.
func TestPrunerTicks(t *testing.T) {
	t.Parallel()
	calls := make(chan struct{}, 10)
	fail := true
	prune := func(context.Context) (int64, error) {
		calls <- struct{}{}
		if fail {
			fail = false // read and written by the pruner's goroutine only
			return 0, errors.New("database is down")
		}
		return 1, nil
	}
	ticks := make(chan time.Time)
	stopped := false
	p := newPruner("the audit log", prune, slog.New(slog.DiscardHandler), ticks, func() { stopped = true })
	p.start(t.Context())
	<-calls // at start (it fails)
	ticks <- time.Time{}
	<-calls
	ticks <- time.Time{}
	<-calls
	p.stop()
	require.True(t, stopped, "the ticker is stopped")
	select {
	case <-p.done:
	default:
		t.Fatal("the goroutine still runs")
	}
	require.Empty(t, calls, "nothing after stop")
}
