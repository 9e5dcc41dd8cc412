package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestCallsReadTheSessionOnlyWhenAnotherWriterAppended: a call in flight
// is watched for a cancel, but reads the session's row up front only when
// the store announced another writer's append since the runner's claim:
// a turn that nobody else writes to reads the row about once a step (the
// tick's controls), not once more per call.
func TestCallsReadTheSessionOnlyWhenAnotherWriterAppended(t *testing.T) {
	const perTurn = 30
	e, cs := startResumeEngine(t, perTurn, func(c *Config) {
		c.PollInterval = time.Hour // no poll for lost notices in the turn
	})
	ctx := context.Background()
	id := parkedSession(t, e, perTurn, 1)
	cs.arm(true)
	_, err := e.CreateTurn(ctx, id, &lt.CreateTurnRequest{Input: "continue"})
	require.NoError(t, err)
	// Waited for on the store under the counter, so that only the
	// engine's reads count.
	require.Eventually(t, func() bool {
		row, err := cs.Store.SessionGet(ctx, id)
		require.NoError(t, err)
		return row.Status == string(lt.SessionIdle)
	}, time.Minute, 2*time.Millisecond)
	cs.mu.Lock()
	gets, lastSeqs := cs.gets, cs.lastSeqs
	cs.mu.Unlock()
	cs.arm(false)
	// A step here is three ticks, each reading the session's last seq for
	// the controls (readControls, SessionLastSeq), and two calls, a model
	// call and a tool call. A call's watcher reads the row only if an
	// append it has not read was heard since the claim: none here, so the
	// rows read are the claim's own few; a read per call would be two a
	// step (2*perTurn).
	require.Less(t, gets, perTurn/2, "session rows read in a turn of %d steps", perTurn)
	// One last-seq read per tick, not one more per call (five a step).
	require.Less(t, lastSeqs, 4*perTurn, "last seqs read in a turn of %d steps", perTurn)
}
