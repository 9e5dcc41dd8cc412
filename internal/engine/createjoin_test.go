package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// sessionWrite is one write of a session's journal as the store was asked
// for it.
type sessionWrite struct {
	create bool // SessionCreate, else EventAppend
	leased bool // a creation with a claim, or an append under a lease
	types  []string
}

// writeLog records, per session, the journal writes the store was asked
// for, in order.
type writeLog struct {
	store.Store
	mu     sync.Mutex
	writes map[string][]sessionWrite
}

func newWriteLog(st store.Store) *writeLog {
	return &writeLog{Store: st, writes: map[string][]sessionWrite{}}
}

func eventTypes(evs []store.NewEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func (w *writeLog) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	evs, err := w.Store.SessionCreate(ctx, p)
	if err == nil {
		w.mu.Lock()
		w.writes[p.Session.ID] = append(w.writes[p.Session.ID], sessionWrite{create: true, leased: p.Claim != nil, types: eventTypes(p.Events)})
		w.mu.Unlock()
	}
	return evs, err
}

func (w *writeLog) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	evs, err := w.Store.EventAppend(ctx, p)
	if err == nil {
		w.mu.Lock()
		w.writes[p.SessionID] = append(w.writes[p.SessionID], sessionWrite{leased: p.Fence != nil, types: eventTypes(p.Events)})
		w.mu.Unlock()
	}
	return evs, err
}

func (w *writeLog) of(id string) []sessionWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]sessionWrite(nil), w.writes[id]...)
}

// newJoinHarness is newHarnessThrough with the engine's createJoinWait set.
func newJoinHarness(t *testing.T, p model.Provider, joinWait time.Duration, wrap func(h *harness) store.Store) *harness {
	t.Helper()
	return newHarnessConfigured(t, p, wrap, func(c *engine.Config) { engine.SetCreateJoinWaitForTest(c, joinWait) })
}

// waitHandedOff polls until a session created on h waits for its
// scheduler to start its runner.
func waitHandedOff(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.eng.HandedOffForTest() == 0 {
		require.True(t, time.Now().Before(deadline), "the session was not handed to the scheduler")
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// waitFreeWorkers polls until at least n of h's worker slots are free.
func waitFreeWorkers(t *testing.T, h *harness, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.eng.FreeWorkersForTest() < n {
		require.True(t, time.Now().Before(deadline), "the worker was not freed")
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// TestCreatedSessionWrittenWithItsFirstRequest: a session created on a node
// with a worker free is written once, with its runner's first append: its
// creation, the turn's start and the first model request in one
// transaction, leased to the node; the creator's call returns once that has
// committed, before the model answers. Every later step is one append.
func TestCreatedSessionWrittenWithItsFirstRequest(t *testing.T) {
	p := newGatedScripted()
	t.Cleanup(p.open)
	var log *writeLog
	h := newJoinHarness(t, p, time.Hour, func(h *harness) store.Store {
		log = newWriteLog(h.store)
		return log
	})
	s := create(t, h, spec(t, `[{"delay_ms":1000,"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "list_files"}), nil)

	// Returned with the model's first answer held by the gate.
	writes := log.of(s.ID)
	require.Len(t, writes, 1, "written once when the creator's call returned")
	first := writes[0]
	require.True(t, first.create && first.leased, "a creation leased to this node")
	require.Equal(t, []string{lt.EventSessionCreated, lt.EventTurnCreated}, first.types[:2])
	require.Contains(t, first.types, lt.EventTurnStarted)
	require.Equal(t, lt.EventModelRequested, first.types[len(first.types)-1], "the first request is in the creation's transaction")
	require.LessOrEqual(t, len(p.sent()), 1)

	p.open()
	waitRowStatus(t, h.store, s.ID, lt.SessionIdle)
	// The log records a write once the store answered it, a moment after
	// it committed.
	deadline := time.Now().Add(10 * time.Second)
	for len(log.of(s.ID)) < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	writes = log.of(s.ID)
	require.Len(t, writes, 3, "the creation with the first request, the first step with the second request, the answer")
	for _, w := range writes[1:] {
		require.False(t, w.create)
		require.True(t, w.leased)
	}
	require.Len(t, p.sent(), 2)
	checkJournal(t, h.store, s.ID)
}

// TestCreationWrittenByItsCreatorWhenTheRunnerIsLate: when the scheduler
// does not start the session's runner within createJoinWait (here, it is
// in a claim that stalls), the creator writes the creation alone, leased,
// and returns; the runner, started later, appends its first request after
// it, and the session runs to its end once.
func TestCreationWrittenByItsCreatorWhenTheRunnerIsLate(t *testing.T) {
	p := newGatedScripted()
	p.open()
	var log *writeLog
	claims := &heldClaims{}
	h := newJoinHarness(t, p, 0, func(h *harness) store.Store {
		log = newWriteLog(h.store)
		claims.Store = log
		return claims
	})
	claims.stall(t)
	s := create(t, h, spec(t, `[{"text":"done"}]`), nil)
	writes := log.of(s.ID)
	require.Len(t, writes, 1)
	require.True(t, writes[0].create && writes[0].leased)
	require.Equal(t, []string{lt.EventSessionCreated, lt.EventTurnCreated}, writes[0].types, "the creation alone")

	claims.letGo()
	waitRowStatus(t, h.store, s.ID, lt.SessionIdle)
	writes = log.of(s.ID)
	require.Greater(t, len(writes), 1)
	require.False(t, writes[1].create)
	require.Contains(t, writes[1].types, lt.EventModelRequested, "the runner's first append, after the creation")
	require.Len(t, p.sent(), 1)
	require.Len(t, events(t, h, s.ID, lt.EventTurnCompleted), 1)
	checkJournal(t, h.store, s.ID)
}

// TestCreationOfASessionNotStartedBeforeAStopIsWritten: a session handed to
// the scheduler whose runner never starts (the engine stops first) is
// written all the same, not leased (any node claims it), and the creator's
// call returns it.
func TestCreationOfASessionNotStartedBeforeAStopIsWritten(t *testing.T) {
	p := newGatedScripted()
	t.Cleanup(p.open)
	claims := &heldClaims{}
	h := newJoinHarness(t, p, time.Hour, func(h *harness) store.Store {
		claims.Store = h.store
		return claims
	})
	claims.stall(t)
	type result struct {
		s   *lt.Session
		err error
	}
	created := make(chan result, 1)
	go func() {
		s, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{AgentSpec: spec(t, `[{"text":"done"}]`), Input: "go"})
		created <- result{s, err}
	}()
	waitHandedOff(t, h)
	stopped := make(chan error, 1)
	go func() { stopped <- h.eng.Stop(context.Background()) }()
	// The engine stops first: the scheduler sees the drain once its
	// claim returns, not the session handed off.
	require.Eventually(t, h.eng.DrainingForTest, 10*time.Second, time.Millisecond, "the engine did not begin to drain")
	claims.letGo()
	require.NoError(t, <-stopped)

	r := <-created
	require.NoError(t, r.err)
	row, err := h.store.SessionGet(context.Background(), r.s.ID)
	require.NoError(t, err)
	require.True(t, row.Runnable, "claimable")
	require.Empty(t, row.Lease.Owner, "not leased")
	evs, err := h.store.EventList(context.Background(), r.s.ID, 0, 100)
	require.NoError(t, err)
	require.Len(t, evs, 2, "the creation's events only")
	require.Empty(t, p.sent())
}

// failingJoinedCreations refuses every creation that carries a first model
// request (one its runner writes), as a database gone away would, and
// counts the session reads and writes that came after a refusal.
type failingJoinedCreations struct {
	store.Store
	mu      sync.Mutex
	refused map[string]bool
	after   int
}

func (f *failingJoinedCreations) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	if n := len(p.Events); n > 0 && p.Events[n-1].Type == lt.EventModelRequested {
		f.mu.Lock()
		f.refused[p.Session.ID] = true
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: the test's database went away", store.ErrUnavailable)
	}
	return f.Store.SessionCreate(ctx, p)
}

func (f *failingJoinedCreations) touched(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused[id] {
		f.after++
	}
}

func (f *failingJoinedCreations) SessionGet(ctx context.Context, id string) (*store.SessionRow, error) {
	f.touched(id)
	return f.Store.SessionGet(ctx, id)
}

func (f *failingJoinedCreations) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	f.touched(id)
	return f.Store.SessionLastSeq(ctx, id)
}

func (f *failingJoinedCreations) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	f.touched(p.SessionID)
	return f.Store.EventAppend(ctx, p)
}

func (f *failingJoinedCreations) LeaseRenew(ctx context.Context, l store.Lease, expiresAt time.Time) error {
	f.touched(l.SessionID)
	return f.Store.LeaseRenew(ctx, l, expiresAt)
}

func (f *failingJoinedCreations) LeaseRelease(ctx context.Context, l store.Lease) error {
	f.touched(l.SessionID)
	return f.Store.LeaseRelease(ctx, l)
}

// TestJoinedCreationThatFailsLeavesNoSession: when the write of a creation
// with its first request fails, the creator gets the error; nothing of the
// session is stored, read, started again or failed (there is no session);
// the model is never asked; the copy of the workspace its runner made is
// removed; and the worker is free again.
func TestJoinedCreationThatFailsLeavesNoSession(t *testing.T) {
	p := newGatedScripted()
	p.open()
	var failing *failingJoinedCreations
	h := newHarnessConfigured(t, p, func(h *harness) store.Store {
		failing = &failingJoinedCreations{Store: h.store, refused: map[string]bool{}}
		return failing
	}, func(c *engine.Config) {
		c.MaxWorkers = 1
		engine.SetCreateJoinWaitForTest(c, time.Hour)
	})

	_, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{AgentSpec: spec(t, `[{"text":"never asked"}]`), Input: "go"})
	require.ErrorIs(t, err, store.ErrUnavailable)
	// The worker's slot is freed as its runSession ends.
	waitFreeWorkers(t, h, 1)
	rows, err := h.store.SessionList(context.Background(), &store.SessionListParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, rows, "no session stored")
	require.Empty(t, p.sent())
	failing.mu.Lock()
	require.Zero(t, failing.after, "the session not written was read, renewed, released or appended to")
	failing.mu.Unlock()
	left, err := os.ReadDir(filepath.Join(h.dir, "workspaces"))
	require.NoError(t, err)
	for _, e := range left {
		require.False(t, strings.HasPrefix(e.Name(), "ses_"), "the workspace of the session not written is left: %s", e.Name())
	}
}

// TestCreatorThatGivesUpFirstWritesNothing: a creator whose context ends
// before anyone wrote its session's creation (here the scheduler is held,
// and the creator would wait an hour) writes nothing: the session is never
// stored, its runner, once started, ends without a write, and its worker
// is free again.
func TestCreatorThatGivesUpFirstWritesNothing(t *testing.T) {
	p := newGatedScripted()
	p.open()
	claims := &heldClaims{}
	h := newJoinHarness(t, p, time.Hour, func(h *harness) store.Store {
		claims.Store = h.store
		return claims
	})
	claims.stall(t)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec(t, `[{"text":"never asked"}]`), Input: "go"})
		errs <- err
	}()
	waitHandedOff(t, h)
	cancel()
	require.ErrorIs(t, <-errs, context.Canceled)
	free := h.eng.FreeWorkersForTest()
	claims.letGo()
	waitFreeWorkers(t, h, free+1)
	rows, err := h.store.SessionList(context.Background(), &store.SessionListParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, rows, "no session stored")
	require.Empty(t, p.sent())
}
