package engine

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPauseDropsAClaimingWorkersUnsavedWork: the API pauses a queued
// session at once, while a worker that had just claimed it has built its
// first events (the turn started, the session running) without saving
// them. Its append meets the pause: it drops them and starts over from the
// journal, where it finds the session paused and gives it back, having
// started nothing.
func TestPauseDropsAClaimingWorkersUnsavedWork(t *testing.T) {
	ctx := context.Background()
	e, st := unstartedEngine(t) // this test is the worker
	s, lease := claimNewSession(t, e, st, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"done"}]`)}})

	r, err := e.newRunner(ctx, lease)
	require.NoError(t, err)
	turn := r.st.CurrentTurn()
	require.NoError(t, r.add(lt.EventTurnStarted, turn.ID, 0, lt.TurnStartedData{TurnID: turn.ID}))
	require.NoError(t, r.status(lt.SessionRunning, ""))

	p, err := e.PauseSession(ctx, s.ID, &lt.PauseRequest{Reason: "not now"})
	require.NoError(t, err)
	require.Equal(t, lt.SessionPaused, p.Status, "queued: paused at once")

	require.ErrorIs(t, r.flush(ctx, false), errStaleBatch)
	r.env.close()

	r, err = e.newRunner(ctx, lease)
	require.NoError(t, err)
	defer r.env.close()
	done, err := r.tick(ctx)
	require.NoError(t, err)
	require.True(t, done, "the runner gives the paused session back")
	row, err := st.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner)
	require.False(t, row.Runnable)
	require.Equal(t, string(lt.SessionPaused), row.Status)
	evs, err := st.EventList(ctx, s.ID, 0, 100)
	require.NoError(t, err)
	for _, ev := range evs {
		require.NotEqual(t, lt.EventTurnStarted, ev.Type, "the dropped turn.started was never saved")
	}
}

// claimNewSession creates a session of sp on e (an engine not started:
// the test is its worker) and claims its lease by hand, as node-a.
// unstartedEngine returns an engine (node-a, the scripted provider) over a
// new SQLite store, not started: the test is its worker, and it hears no
// notices.
func unstartedEngine(t *testing.T) (*Engine, *sqlite.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(t.Context()))
	t.Cleanup(func() { st.Close() })
	e, err := New(st, &Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"), NodeID: "node-a",
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)},
	})
	require.NoError(t, err)
	return e, st
}

func claimNewSession(t *testing.T, e *Engine, st store.Store, sp *lt.AgentSpec) (*lt.Session, store.Lease) {
	t.Helper()
	ctx := t.Context()
	s, err := e.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
	require.NoError(t, err)
	now := e.clock.Now()
	leases, err := st.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "node-a", Now: now, ExpiresAt: now.Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, leases, 1)
	return s, leases[0]
}
