package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// lateReleaseStore answers a lease release, once armed, as the SQLite
// writer does when the session's renewal shares the release's batch: the
// release is applied in the batch's transaction; the renewal, queued
// behind it, finds the lease given up (store.ErrLeaseLost) and is answered
// at once; the release is answered only after the commit. A caller whose
// context ends before that answer gets the context's error, and the
// release commits all the same, later (the store's contract: "the write
// may or may not have committed").
type lateReleaseStore struct {
	store.Store

	mu        sync.Mutex
	armed     bool
	releasing map[string]bool // sessions whose release is in the batch
	landed    chan struct{}   // closed: the late commits may land
	waiting   chan struct{}   // a release waits for its answer on a live ctx
	late      sync.WaitGroup
}

func newLateReleaseStore() *lateReleaseStore {
	return &lateReleaseStore{releasing: map[string]bool{}, landed: make(chan struct{}), waiting: make(chan struct{}, 1)}
}

func (s *lateReleaseStore) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

// land lets the late commits land and waits for them.
func (s *lateReleaseStore) land() {
	s.mu.Lock()
	select {
	case <-s.landed:
	default:
		close(s.landed)
	}
	s.mu.Unlock()
	s.late.Wait()
}

func (s *lateReleaseStore) LeaseRenew(ctx context.Context, l store.Lease, expiresAt time.Time) error {
	s.mu.Lock()
	releasing := s.releasing[l.SessionID]
	s.mu.Unlock()
	if releasing {
		return fmt.Errorf("renew lease on session %s: %w", l.SessionID, store.ErrLeaseLost)
	}
	return s.Store.LeaseRenew(ctx, l, expiresAt)
}

func (s *lateReleaseStore) LeaseRelease(ctx context.Context, l store.Lease) error {
	if !s.late1(ctx, l.SessionID) {
		return s.Store.LeaseRelease(ctx, l)
	}
	s.late.Go(func() {
		<-s.landed
		_ = s.Store.LeaseRelease(context.WithoutCancel(ctx), l)
	})
	return fmt.Errorf("release lease on session %s: %w", l.SessionID, ctx.Err())
}

// EventAppend is LeaseRelease's answer for an append that gives the lease
// up (a runner parking).
func (s *lateReleaseStore) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if !p.ReleaseLease || !s.late1(ctx, p.SessionID) {
		return s.Store.EventAppend(ctx, p)
	}
	s.late.Go(func() {
		<-s.landed
		_, _ = s.Store.EventAppend(context.WithoutCancel(ctx), p)
	})
	return nil, fmt.Errorf("append events to session %s: %w", p.SessionID, ctx.Err())
}

// late1 reports whether the release of session id, by a caller waiting
// on ctx, is answered after ctx ended (and then commits later): when
// armed, unless nothing can end ctx (the caller waits for the answer
// whatever happens). The renewal's answer comes first, and the commit
// after a while (a bound, so that a caller nothing cancels is answered).
func (s *lateReleaseStore) late1(ctx context.Context, id string) bool {
	s.mu.Lock()
	armed := s.armed
	if armed {
		s.releasing[id] = true
	}
	s.mu.Unlock()
	if !armed || ctx.Done() == nil {
		return false
	}
	select {
	case s.waiting <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	return ctx.Err() != nil
}

// newLateReleaseHarness starts node-a over a lateReleaseStore, not armed.
func newLateReleaseHarness(t *testing.T) (*harness, *lateReleaseStore) {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	ls := newLateReleaseStore()
	t.Cleanup(ls.land) // before the store closes
	h.wrapStore = func(s store.Store) store.Store {
		ls.Store = s
		return ls
	}
	h.start("node-a")
	return h, ls
}

// TestStopWaitsForTheDrainReleases: a drained runner waits for the answer
// to its lease's release whatever its renewal finds meanwhile, so Stop
// returns with the lease given back. Its renewal, answered first when it
// shares the release's batch, found the lease given up, took that for a
// loss and cancelled the runner, which stopped waiting: Stop returned with
// the release not yet committed (TestStopDrainsRunningStep failed so in
// CI, after "lease lost ... release lease on session ...: context
// canceled").
func TestStopWaitsForTheDrainReleases(t *testing.T) {
	h, ls := newLateReleaseHarness(t)

	ctx := context.Background()
	work := t.TempDir()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"touch `+work+`/started; sleep 0.3"}}]},{"text":"ok"}]`,
			lt.ToolSpec{Name: "shell"}),
		Input: "go",
	})
	require.NoError(t, err)
	waitFile(t, filepath.Join(work, "started"))
	ls.arm()
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, h.eng.Stop(stopCtx))

	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner, "Stop returned before the drained session's lease was given back")
}

// TestStopWaitsForTheParkRelease: the same for a runner parking, whose
// last append gives the lease up: it waits for that append's answer, so a
// Stop that comes meanwhile returns with the session parked and its lease
// given back.
func TestStopWaitsForTheParkRelease(t *testing.T) {
	h, ls := newLateReleaseHarness(t)
	ls.arm() // before the session exists

	ctx := context.Background()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec(t, `[{"text":"ok"}]`), Input: "go"})
	require.NoError(t, err)
	// The park's append waits for its answer (before the fix, on a
	// context its renewal ends), or is answered: parked.
	deadline := time.Now().Add(10 * time.Second)
	for parked := false; !parked; {
		select {
		case <-ls.waiting:
			parked = true
		default:
			got, err := h.eng.GetSession(ctx, s.ID)
			require.NoError(t, err)
			parked = got.Status == lt.SessionIdle
		}
		require.True(t, time.Now().Before(deadline), "the session never parked")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, h.eng.Stop(stopCtx))

	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner, "Stop returned before the parked session's lease was given back")
	require.Equal(t, string(lt.SessionIdle), row.Status)
}
