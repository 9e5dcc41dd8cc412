package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
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

// blockingModel answers no call: each waits until it is cut.
type blockingModel struct{}

func (blockingModel) Respond(ctx context.Context, _ *model.Request) (*model.Response, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// TestCancelBeforeACallStartsCutsItAtOnce: a cancel journaled after the
// runner last read the session, and announced before the call's watcher
// subscribed, is heard by the claim's watch: the call is cut at once, not
// at the next poll (an hour here).
func TestCancelBeforeACallStartsCutsItAtOnce(t *testing.T) {
	e, cs := startResumeEngine(t, 1, func(c *Config) {
		c.PollInterval = time.Hour
		c.Providers = map[string]model.Provider{"block": blockingModel{}}
	})
	ctx := context.Background()
	var once sync.Once
	cs.mu.Lock()
	cs.afterAppend = func(evs []store.Event) {
		for _, ev := range evs {
			if ev.Type != lt.EventModelRequested {
				continue
			}
			// The call's start is durable, its watcher not yet
			// subscribed: cancel now, and wait until the hub has
			// announced the cancel to every watcher.
			once.Do(func() {
				heard, stop := e.hub.watch(ev.SessionID)
				defer stop()
				// On the runner's goroutine: no FailNow here.
				if _, err := e.CancelSession(ctx, ev.SessionID, &lt.CancelRequest{Reason: "test"}); err != nil {
					t.Errorf("cancel: %v", err)
					return
				}
				select {
				case <-heard:
				case <-time.After(time.Minute):
					t.Error("the cancel was not announced")
				}
				e.hub.mu.Lock() // publish holds it while it announces
				e.hub.mu.Unlock()
			})
		}
	}
	cs.mu.Unlock()
	spec := resumeSpec(1)
	spec.Model = lt.ModelSpec{Provider: "block", Name: "block"}
	s, err := e.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec, Input: "wait"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, err := e.GetSession(ctx, s.ID)
		require.NoError(t, err)
		return v.Status == lt.SessionCancelled
	}, 20*time.Second, 2*time.Millisecond, "the call was not cut by the cancel")
}

// TestAPollReadsTheRowOnlyWhenTheJournalGrew: a call's watcher whose
// notices are lost (its channel never speaks) still finds a control at
// its next poll, and until the journal grows each poll reads the
// session's last seq alone, not its row.
func TestAPollReadsTheRowOnlyWhenTheJournalGrew(t *testing.T) {
	e, cs := startResumeEngine(t, 1, func(c *Config) {
		c.PollInterval = 5 * time.Millisecond
	})
	ctx := context.Background()
	id := parkedSession(t, e, 1, 1)
	// The claim that parked it may still append after the status says
	// idle: the journal is read once no worker holds the session.
	require.Eventually(t, func() bool {
		row, err := cs.Store.SessionGet(ctx, id)
		require.NoError(t, err)
		return row.Lease.Owner == ""
	}, time.Minute, time.Millisecond, "the parking claim ends")
	seen, err := cs.Store.SessionLastSeq(ctx, id)
	require.NoError(t, err)

	// The watcher's reads are told apart from the engine's others: the
	// park's appends also make this node check its copy of the
	// workspace (stalecopies.go), which reads the row once, whenever it
	// gets to it.
	callCtx, cancel := context.WithCancelCause(context.WithValue(ctx, ownRead{}, true))
	defer cancel(nil)
	cut := &interruptCause{kind: interruptCancel, msg: "the journal grew"}
	due := func(*journal.State) *interruptCause { return cut } // any state read cuts the call
	lost := make(chan int64)                                   // no notice ever arrives
	cs.arm(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.watchCancel(callCtx, cancel, id, seen, due, lost, func() {}, false, false)
	}()
	require.Eventually(t, func() bool {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		return cs.lastSeqs+cs.gets >= 3
	}, time.Minute, time.Millisecond, "the watcher polls")
	cs.mu.Lock()
	gets := cs.ownGets
	cs.mu.Unlock()
	require.Zero(t, gets, "rows read by the watcher while the journal did not grow")
	require.NoError(t, callCtx.Err())

	_, err = e.CreateTurn(ctx, id, &lt.CreateTurnRequest{Input: "more"})
	require.NoError(t, err)
	<-done
	require.Equal(t, cut, context.Cause(callCtx), "the poll found the journal grown and read the state")
	cs.arm(false)
}
