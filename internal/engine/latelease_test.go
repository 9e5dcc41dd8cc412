package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// lateClaims makes one claim, once armed, reach its node after the
// engine's clock moved on (it waited in the store's queue meanwhile): the
// first that returns a session, or, with held, the first, stalled before it
// reaches the store. It counts the claims that follow it and the takeovers
// among them.
type lateClaims struct {
	store.Store
	clock *fakeClock
	armed atomic.Bool
	// held, when set with armed, holds the late claim until closed (a
	// claim stalled in the store), saying so on holding first.
	held, holding chan struct{}
	mu            sync.Mutex
	fired         bool
	after         int // claims made after the late one
	takeovers     int // leases among them taken over from an expired holder
}

func (s *lateClaims) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]store.Lease, error) {
	var late bool
	if s.held != nil {
		// A claim stalled in the store: the first one once armed.
		if late = s.armed.CompareAndSwap(true, false); late {
			close(s.holding)
			<-s.held
			s.clock.Advance(2 * time.Minute) // four times the lease's life
		}
	}
	leases, err := s.Store.LeaseClaim(ctx, p)
	if s.held == nil && len(leases) > 0 {
		// The claim that returns a session once armed reaches its
		// node late, whichever claim it is (one the scheduler began
		// before the test armed may be the one to find the session
		// runnable): its lease, computed at p.Now, has expired.
		if late = s.armed.CompareAndSwap(true, false); late {
			s.clock.Advance(2 * time.Minute) // four times the lease's life
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fired && !late {
		s.after++
		for _, l := range leases {
			if l.PreviousOwner != "" {
				s.takeovers++
			}
		}
	}
	s.fired = s.fired || late
	return leases, err
}

func (s *lateClaims) counts() (after, takeovers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.after, s.takeovers
}

// requireNoTakeover waits for three claims after the late one (the
// scheduler claims at each poll) and requires that none took a session
// over.
func (s *lateClaims) requireNoTakeover(t *testing.T, deadline time.Time) {
	t.Helper()
	for {
		after, _ := s.counts()
		if after >= 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the scheduler made no claim after the late one")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
	_, takeovers := s.counts()
	require.Zero(t, takeovers, "a claim took a session over from the runner it was leased to")
}

// TestLateClaimRenewedBeforeItsRunnerStarts: a claim that reaches the
// store after its expiry was computed (it waited in a queue while the
// clock moved on) returns a lease already expired. Its runner must not
// start under it: the next claim would take the session over while the
// runner's call is in flight, and find that call started by a worker that
// stalled. The lease is renewed before anything else is claimed: none of
// the claims that follow takes the session over, and the turn ends once,
// its call run once.
func TestLateClaimRenewedBeforeItsRunnerStarts(t *testing.T) {
	p := newGatedScripted()
	t.Cleanup(p.open)
	var late *lateClaims
	h := newHarnessPolling(t, p, 0, 10*time.Millisecond, func(h *harness) store.Store {
		late = &lateClaims{Store: h.store, clock: h.clock}
		return late
	})
	sp := spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"delay_ms":60000,"text":"done"}]`, lt.ToolSpec{Name: "list_files"})
	sp.Policies = []lt.Policy{{Tool: "list_files", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)
	waitRowStatus(t, h.store, s.ID, lt.SessionRequiresAction)
	got, err := h.eng.GetSession(context.Background(), s.ID)
	require.NoError(t, err)
	act := got.RequiredActions[0]

	late.armed.Store(true) // the claim the decision makes due comes late
	_, err = h.eng.DecideAction(context.Background(), s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: act.ArgumentsSHA256})
	require.NoError(t, err)
	// The second model call is in flight (held by the gate), under the
	// lease the late claim returned; the scheduler claims at each poll.
	deadline := time.Now().Add(10 * time.Second)
	for len(events(t, h, s.ID, lt.EventModelRequested)) < 2 {
		require.True(t, time.Now().Before(deadline), "the second model call was not made")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
	late.requireNoTakeover(t, deadline)

	p.open()
	waitRowStatus(t, h.store, s.ID, lt.SessionIdle)
	require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1)
	require.Len(t, events(t, h, s.ID, lt.EventTurnCompleted), 1)
	checkJournal(t, h.store, s.ID)
}

// TestSessionHandedOffDuringAStalledClaimRenewedBeforeItRuns: a session
// created here with a lease waits for the scheduler, which is in a claim
// that stalls in the store while the clock moves past the lease's life.
// The handed-off lease is renewed before its runner starts: none of the
// claims that follow takes the session over.
func TestSessionHandedOffDuringAStalledClaimRenewedBeforeItRuns(t *testing.T) {
	p := newGatedScripted()
	t.Cleanup(p.open)
	var late *lateClaims
	h := newHarnessPolling(t, p, 0, 10*time.Millisecond, func(h *harness) store.Store {
		late = &lateClaims{Store: h.store, clock: h.clock, held: make(chan struct{}), holding: make(chan struct{})}
		return late
	})
	late.armed.Store(true)
	select {
	case <-late.holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the scheduler made no claim")
	}
	s := create(t, h, spec(t, `[{"delay_ms":60000,"text":"done"}]`), nil)
	close(late.held) // the stalled claim returns, two minutes on

	deadline := time.Now().Add(10 * time.Second)
	waitEvent(t, h, s.ID, lt.EventModelRequested) // its call is in flight, held by the gate
	late.requireNoTakeover(t, deadline)
	p.open()
	waitRowStatus(t, h.store, s.ID, lt.SessionIdle)
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1)
	checkJournal(t, h.store, s.ID)
}
