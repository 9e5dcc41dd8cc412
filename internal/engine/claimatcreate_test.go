package engine_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// claimCounter counts, per session, the claims that returned its lease.
type claimCounter struct {
	store.Store
	mu     sync.Mutex
	claims map[string]int
}

func (c *claimCounter) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]store.Lease, error) {
	leases, err := c.Store.LeaseClaim(ctx, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range leases {
		c.claims[l.SessionID]++
	}
	return leases, err
}

func (c *claimCounter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claims[id]
}

// startEngine starts an engine over st and stops it when the test ends.
func startEngine(t testing.TB, st store.Store, cfg *engine.Config) *engine.Engine {
	t.Helper()
	eng, err := engine.New(st, cfg)
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Stop(ctx)
	})
	return eng
}

// newHarnessThrough starts a harness whose engine (node-a, with provider
// p as "scripted" and at most maxWorkers workers; 0: the default) works
// through the store wrap returns over the harness's own (h.store).
func newHarnessThrough(t *testing.T, p model.Provider, maxWorkers int, wrap func(h *harness) store.Store) *harness {
	t.Helper()
	return newHarnessPolling(t, p, maxWorkers, 10*time.Millisecond, wrap)
}

// newHarnessPolling is newHarnessThrough with the engine's PollInterval,
// which also paces a call's watcher of controls (watchCancel) in real time:
// a test counting store reads gives it an hour, so a call that outlasts
// a tick on a loaded machine adds no read of its own.
func newHarnessPolling(t *testing.T, p model.Provider, maxWorkers int, poll time.Duration, wrap func(h *harness) store.Store) *harness {
	t.Helper()
	return newHarnessConfigured(t, p, wrap, func(c *engine.Config) {
		c.PollInterval, c.MaxWorkers = poll, maxWorkers
	})
}

// newHarnessConfigured starts a harness whose engine (node-a, with provider
// p as "scripted", polling every 10 ms) works through the store wrap
// returns, its config changed by configure first.
func newHarnessConfigured(t *testing.T, p model.Provider, wrap func(h *harness) store.Store, configure func(*engine.Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	cfg := &engine.Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"), NodeID: "node-a", Clock: h.clock,
		Providers: map[string]model.Provider{"scripted": p}, PollInterval: 10 * time.Millisecond,
	}
	configure(cfg)
	h.eng = startEngine(t, wrap(h), cfg)
	return h
}

// TestCreatedSessionRunsWithoutAClaim: a node with a worker free runs the
// session it creates under the lease it was created with (epoch 1), with
// no claim; one created while no worker is free is claimed as before, once
// a worker is.
func TestCreatedSessionRunsWithoutAClaim(t *testing.T) {
	p := newGatedScripted()
	t.Cleanup(p.open)
	var counted *claimCounter
	h := newHarnessThrough(t, p, 1, func(h *harness) store.Store {
		counted = &claimCounter{Store: h.store, claims: map[string]int{}}
		return counted
	})

	// The first holds the only worker in a model call until the gate opens.
	a := create(t, h, spec(t, `[{"delay_ms":60000,"text":"first"}]`), nil)
	row, err := h.store.SessionGet(context.Background(), a.ID)
	require.NoError(t, err)
	require.Equal(t, "node-a", row.Lease.Owner, "created leased to the node that runs it")
	require.Equal(t, int64(1), row.Lease.Epoch)
	waitEvent(t, h, a.ID, lt.EventModelRequested)
	b := create(t, h, spec(t, `[{"text":"second"}]`), nil)
	row, err = h.store.SessionGet(context.Background(), b.ID)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner, "no worker was free: created without a lease")

	p.open()
	h.waitStatus(a.ID, lt.SessionIdle)
	h.waitStatus(b.ID, lt.SessionIdle)
	require.Zero(t, counted.count(a.ID), "run under the lease it was created with")
	require.Equal(t, 1, counted.count(b.ID), "claimed once a worker was free")
	checkJournal(t, h.store, a.ID)
	checkJournal(t, h.store, b.ID)
}

// heldClaims is a store whose LeaseClaims wait, while held, until let go,
// and which records the sessions claims returned, in order.
type heldClaims struct {
	store.Store
	mu      sync.Mutex
	held    chan struct{} // closed to let held claims go; nil: not held
	entered chan struct{} // a claim began while held
	order   []string
}

func (c *heldClaims) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held, c.entered = make(chan struct{}), make(chan struct{}, 1)
}

// stall holds the claims and waits until the scheduler is in one (it
// claims at each poll), as a claim stalled in the store would hold it.
func (c *heldClaims) stall(t *testing.T) {
	t.Helper()
	c.hold()
	select {
	case <-c.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the scheduler made no claim")
	}
}

// letGo lets the held claims go, and the later ones through.
func (c *heldClaims) letGo() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.held)
	c.held = nil
}

func (c *heldClaims) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]store.Lease, error) {
	c.mu.Lock()
	held, entered := c.held, c.entered
	c.mu.Unlock()
	if held != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	leases, err := c.Store.LeaseClaim(ctx, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range leases {
		c.order = append(c.order, l.SessionID)
	}
	return leases, err
}

func (c *heldClaims) claimed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// TestCreatedSessionQueuesBehindABacklog: while older sessions wait for a
// worker, a session created as a worker frees does not take it ahead of
// the scheduler's claim: the older ones run first (oldest first).
func TestCreatedSessionQueuesBehindABacklog(t *testing.T) {
	p := newGatedScripted()
	t.Cleanup(p.open)
	var claims *heldClaims
	h := newHarnessThrough(t, p, 1, func(h *harness) store.Store {
		claims = &heldClaims{Store: h.store}
		return claims
	})
	ctx := context.Background()

	// A holds the only worker; B is queued behind it.
	a := create(t, h, spec(t, `[{"delay_ms":60000,"text":"first"}]`), nil)
	waitEvent(t, h, a.ID, lt.EventModelRequested)
	// Each created a second later: claims take the oldest first.
	h.clock.Advance(time.Second)
	b := create(t, h, spec(t, `[{"text":"second"}]`), nil)

	// A ends and frees the worker; the scheduler's claim for it is held,
	// so C is created while the worker is free and B still waits for it.
	claims.hold()
	p.open()
	h.waitStatus(a.ID, lt.SessionIdle)
	select {
	case <-claims.entered:
	case <-time.After(time.Minute):
		t.Fatal("no claim once the worker was free")
	}
	h.clock.Advance(time.Second)
	c := create(t, h, spec(t, `[{"text":"third"}]`), nil)
	row, err := h.store.SessionGet(ctx, c.ID)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner, "B waits for a worker: C is created without a lease")
	close(claims.held)

	h.waitStatus(b.ID, lt.SessionIdle)
	h.waitStatus(c.ID, lt.SessionIdle)
	require.Equal(t, []string{b.ID, c.ID}, claims.claimed(), "claimed oldest first")
	checkJournal(t, h.store, b.ID)
	checkJournal(t, h.store, c.ID)
}
