package engine_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// claimCalls counts the claims made, whatever they found.
type claimCalls struct {
	store.Store
	calls atomic.Int64
}

func (c *claimCalls) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]store.Lease, error) {
	c.calls.Add(1)
	return c.Store.LeaseClaim(ctx, p)
}

// newHarnessWithoutPolls is newHarnessThrough with a poll interval that
// never comes: whatever is claimed is claimed because the scheduler heard
// of it or freed a worker, never by the poll.
func newHarnessWithoutPolls(t *testing.T, p model.Provider, maxWorkers int, wrap func(h *harness) store.Store) *harness {
	t.Helper()
	return newHarnessPolling(t, p, maxWorkers, time.Hour, func(h *harness) store.Store {
		h.clock.holdHours = true // before the engine starts: its first poll waits too
		return wrap(h)
	})
}

// TestNoClaimWhenNothingIsClaimable: sessions created on a node with a
// worker free, run one after another, are run under the lease they were
// created with, and nothing else becomes claimable meanwhile: the
// scheduler claims once, as it starts, and never again. A worker freeing
// its slot and a session handed off by its creator made it claim each
// time (three claims a session, finding nothing).
func TestNoClaimWhenNothingIsClaimable(t *testing.T) {
	p := newGatedScripted()
	p.open()
	counted := &claimCalls{}
	h := newHarnessWithoutPolls(t, p, 0, func(h *harness) store.Store {
		counted.Store = h.store
		return counted
	})
	for range 3 {
		s := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`,
			lt.ToolSpec{Name: "list_files"}), nil)
		h.waitStatus(s.ID, lt.SessionIdle)
		checkJournal(t, h.store, s.ID)
	}
	require.LessOrEqual(t, counted.calls.Load(), int64(1), "only the start's claim")
}

// TestNoticeHeardWhileBusyIsClaimedWhenAWorkerFrees: a session that
// became claimable while no worker was free (its notice came and went) is
// claimed as soon as one frees, with no poll to find it.
func TestNoticeHeardWhileBusyIsClaimedWhenAWorkerFrees(t *testing.T) {
	p := newGatedScripted()
	t.Cleanup(p.open)
	counted := &claimCounter{claims: map[string]int{}}
	h := newHarnessWithoutPolls(t, p, 1, func(h *harness) store.Store {
		counted.Store = h.store
		return counted
	})

	a := create(t, h, spec(t, `[{"delay_ms":60000,"text":"first"}]`), nil)
	waitEvent(t, h, a.ID, lt.EventModelRequested)
	b := create(t, h, spec(t, `[{"text":"second"}]`), nil)
	row, err := h.store.SessionGet(context.Background(), b.ID)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner, "no worker was free: created claimable, and announced so")

	p.open()
	h.waitStatus(a.ID, lt.SessionIdle)
	h.waitStatus(b.ID, lt.SessionIdle)
	require.Equal(t, 1, counted.count(b.ID))
	checkJournal(t, h.store, b.ID)
}

// pollClock is a fakeClock whose waits of exactly poll last pollReal in
// real time (the fakeClock's last at most 20 ms).
type pollClock struct {
	*fakeClock
	poll, pollReal time.Duration
}

func (c *pollClock) After(d time.Duration) <-chan time.Time {
	if d == c.poll {
		return time.After(c.pollReal)
	}
	return c.fakeClock.After(d)
}

// TestPassedWakeTimeClaimedWhileSessionsKeepEnding: a wake time that
// passes is announced by nobody; the poll finds it. Sessions run one after
// another on the node meanwhile, each waking the scheduler more often than
// the poll interval; those wake-ups claim nothing, and the poll's timer
// runs through them rather than starting over at each.
func TestPassedWakeTimeClaimedWhileSessionsKeepEnding(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	h := &harness{t: t, dir: dir, clock: fake}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	h.eng = startEngine(t, h.store, &engine.Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"), NodeID: "node-a",
		Clock:        &pollClock{fakeClock: fake, poll: time.Minute, pollReal: time.Second},
		PollInterval: time.Minute, Providers: map[string]model.Provider{"scripted": scripted.New(nil)},
	})

	sleeper := create(t, h, spec(t, `[{"tool_calls":[{"name":"sleep","arguments":{"seconds":3600}}]},{"text":"woke"}]`,
		lt.ToolSpec{Name: "sleep"}), nil)
	h.waitStatus(sleeper.ID, lt.SessionWaiting)
	fake.Advance(2 * time.Hour)

	deadline := time.Now().Add(10 * time.Second)
	for {
		s := create(t, h, spec(t, `[{"text":"ok"}]`), nil)
		h.waitStatus(s.ID, lt.SessionIdle)
		got, err := h.eng.GetSession(context.Background(), sleeper.ID)
		require.NoError(t, err)
		if got.Status == lt.SessionIdle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session whose wake time passed is still %s", got.Status)
		}
	}
	checkJournal(t, h.store, sleeper.ID)
}
