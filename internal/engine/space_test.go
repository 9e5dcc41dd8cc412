package engine_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/freespace"
	"github.com/longhaul-dev/longhaul/internal/freespace/freespacetest"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// spaceEngineStart is the time of startSpaceEngine's clock.
var spaceEngineStart = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// startSpaceEngine starts an engine on st whose free-space check is check.
func startSpaceEngine(t *testing.T, st store.Store, dir string, check func() error) *engine.Engine {
	t.Helper()
	return startEngine(t, st, &engine.Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"), NodeID: "node-a",
		Clock:        &fakeClock{now: spaceEngineStart},
		Providers:    map[string]model.Provider{"scripted": scripted.New(nil)},
		PollInterval: 10 * time.Millisecond,
		FreeSpace:    check,
	})
}

// startFloorEngine starts an engine on st whose data volume, dir, has a
// floor of 64 MiB and free bytes free (1 GiB to start with); checks counts
// the checks of the space.
func startFloorEngine(t *testing.T, st store.Store, dir string, free *atomic.Uint64, checks *atomic.Int64) *engine.Engine {
	t.Helper()
	free.Store(1 << 30)
	mon, err := freespace.New([]freespace.Volume{{Dir: dir, Name: "the data volume"}}, 64,
		&freespace.Config{Free: func(string) (uint64, error) { checks.Add(1); return free.Load(), nil }})
	require.NoError(t, err)
	return startSpaceEngine(t, st, dir, mon.Check)
}

// TestLowSpaceRefusesWorkAndRecovers: below the floor the engine says it is
// not ready, refuses new sessions with a 507 naming the volume, claims
// nothing, and takes the work up by itself once space returns.
func TestLowSpaceRefusesWorkAndRecovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openStore(t, dir)
	t.Cleanup(func() { st.Close() })
	var free atomic.Uint64
	var checks atomic.Int64
	eng := startFloorEngine(t, st, dir, &free, &checks)
	ctx := context.Background()
	req := &lt.CreateSessionRequest{AgentSpec: spec(t, `[{"text":"done"}]`), Input: "hi"}

	require.NoError(t, eng.Ready(ctx))
	free.Store(10 << 20)
	err := eng.Ready(ctx)
	ae := apierror.From(err)
	require.Equal(t, http.StatusServiceUnavailable, ae.Status)
	require.Equal(t, "the data volume is nearly full: 10 MiB free, below the floor of 64 MiB", ae.Message)

	_, err = eng.CreateSession(ctx, req)
	ae = apierror.From(err)
	require.Equal(t, http.StatusInsufficientStorage, ae.Status, "error: %v", err)
	require.Equal(t, lt.CodeInsufficientStorage, ae.Code)
	require.Contains(t, ae.Message, "the data volume is nearly full")
	require.NotContains(t, ae.Message, dir, "no path of the machine")
	list, err := eng.ListSessions(ctx, lt.ListSessionsParams{})
	require.NoError(t, err)
	require.Empty(t, list.Data, "a refused session left nothing behind")

	// A pass of the scheduler that checked the space before it went low
	// may still be claiming: wait for a pass that checks after.
	seen := checks.Load()
	require.Eventually(t, func() bool { return checks.Load() > seen }, 10*time.Second, time.Millisecond,
		"the scheduler checks the space at each pass")

	// A session queued while space was there (here: written straight to the
	// store by a second engine that has no floor) is not claimed below it.
	other, err := engine.New(st, &engine.Config{WorkspaceRoot: filepath.Join(dir, "workspaces"),
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)}})
	require.NoError(t, err)
	s, err := other.CreateSession(ctx, req)
	require.NoError(t, err)
	seen = checks.Load()
	require.Eventually(t, func() bool { return checks.Load() >= seen+5 }, 10*time.Second, time.Millisecond,
		"the scheduler checks the space at each pass")
	got, err := eng.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionQueued, got.Status, "nothing claimed below the floor")
	row, err := st.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner)

	free.Store(1 << 30)
	require.NoError(t, eng.Ready(ctx))
	waitSessionStatus(t, eng, s.ID, lt.SessionIdle)
}

func waitSessionStatus(t *testing.T, eng *engine.Engine, id string, want lt.SessionStatus) *lt.Session {
	t.Helper()
	var s *lt.Session
	require.Eventually(t, func() bool {
		var err error
		s, err = eng.GetSession(context.Background(), id)
		require.NoError(t, err)
		return s.Status == want
	}, 20*time.Second, 5*time.Millisecond, "session %s never became %s", id, want)
	return s
}

// TestDiskFullMidStepResumes fills the real volume under the database and
// the workspaces while a tool runs: the write of its result fails, the
// session is neither failed nor left for its lease to expire, and once the
// space is back it resumes from its journal and completes, with every
// event it had journaled kept.
func TestDiskFullMidStepResumes(t *testing.T) {
	t.Parallel()
	dir := freespacetest.MountTmpfs(t, 16)
	st := openStore(t, dir)
	t.Cleanup(func() { st.Close() })
	var lowSeen atomic.Int64
	mon, err := freespace.New([]freespace.Volume{{Dir: dir, Name: "the data volume"}}, 1, nil)
	require.NoError(t, err)
	check := func() error {
		err := mon.Check()
		if err != nil {
			lowSeen.Add(1)
		}
		return err
	}
	eng := startSpaceEngine(t, st, dir, check)
	ctx := context.Background()

	outside := t.TempDir()
	gate, started := filepath.Join(outside, "go"), filepath.Join(outside, "started")
	s, err := eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[
		 {"tool_calls":[{"name":"shell","arguments":{"command":"touch `+started+`; while [ ! -e `+gate+` ]; do sleep 0.02; done; echo opened"}}]},
		 {"text":"done"}]`, lt.ToolSpec{Name: "shell", Effect: lt.EffectRead}),
		Input: "wait for the gate",
	})
	require.NoError(t, err)
	// The tool runs (a read: nothing of it is journaled before it ends).
	waitFile(t, started)
	before, err := eng.ListEvents(ctx, s.ID, 0, 1000)
	require.NoError(t, err)

	ballast := freespacetest.Fill(t, dir, 0)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	// The tool's result cannot be written: the session waits for space
	// (the monitor is asked again and again) instead of failing.
	require.Eventually(t, func() bool { return lowSeen.Load() >= 10 }, 20*time.Second, time.Millisecond)
	got, err := eng.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionRunning, got.Status)
	row, err := st.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "node-a", row.Lease.Owner, "the lease is kept while waiting")

	require.NoError(t, os.Remove(ballast))
	got = waitSessionStatus(t, eng, s.ID, lt.SessionIdle)
	require.Empty(t, got.StopReason)
	turns, err := eng.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.TurnCompleted, turns[0].Status)
	require.Equal(t, "done", turns[0].Output)

	after, err := eng.ListEvents(ctx, s.ID, 0, 1000)
	require.NoError(t, err)
	require.Greater(t, len(after), len(before))
	for i, ev := range before {
		require.Equal(t, ev.Seq, after[i].Seq)
		require.Equal(t, ev.Type, after[i].Type, "journaled events are kept as they were")
	}
	completed := 0
	for _, ev := range after {
		if ev.Type == lt.EventToolCompleted {
			completed++
			require.Contains(t, string(ev.Data), "opened")
		}
	}
	require.Equal(t, 1, completed)
	checkJournal(t, st, s.ID)
}

// lowFloorEngine starts an engine on a store of its own whose volume has a
// floor of 64 MiB and free bytes free (1 GiB to start with).
func lowFloorEngine(t *testing.T) (*engine.Engine, *atomic.Uint64) {
	dir := t.TempDir()
	st := openStore(t, dir)
	t.Cleanup(func() { st.Close() })
	free := new(atomic.Uint64)
	return startFloorEngine(t, st, dir, free, new(atomic.Int64)), free
}

// TestRerunsAnswerWithTheDiskLow: a request whose server died after its
// work and before its record is run again by the client's retry (its seed,
// engine.WithCreationSeed); with the disk below the floor meanwhile, the
// retry still answers with what the first run made (the session, the
// fork, the turn, the steer), as the first run answered, instead of a 507
// that the client would keep getting until space is freed. A new request
// with the disk low is a 507 still.
func TestRerunsAnswerWithTheDiskLow(t *testing.T) {
	t.Parallel()
	eng, free := lowFloorEngine(t)
	ctx := context.Background()
	seed := func() string { return seedAt(spaceEngineStart) }
	first := func(seed string) context.Context { return engine.WithCreationSeed(ctx, seed, false) }
	retry := func(seed string) context.Context { return engine.WithCreationSeed(ctx, seed, true) }

	made, turned, forked, steered := seed(), seed(), seed(), seed()
	// The second turn, queued or in its model call, lasts for the rest of
	// the test: the steer finds it; a cancel at the end cuts the call, so
	// the engine's stop does not wait for it.
	sp := spec(t, `[{"text":"done"},{"delay_ms":600000,"text":"again"}]`)
	s, err := eng.CreateSession(first(made), &lt.CreateSessionRequest{AgentSpec: sp, Input: "hi"})
	require.NoError(t, err)
	t.Cleanup(func() {
		free.Store(1 << 30) // a turn still queued is claimed, and cancelled
		_, err := eng.CancelSession(ctx, s.ID, &lt.CancelRequest{})
		require.NoError(t, err)
		waitSessionStatus(t, eng, s.ID, lt.SessionCancelled)
	})
	waitSessionStatus(t, eng, s.ID, lt.SessionIdle)
	cps, err := eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	require.NotEmpty(t, cps)
	f, err := eng.ForkSession(first(forked), s.ID, &lt.ForkRequest{CheckpointID: cps[len(cps)-1].ID}, "")
	require.NoError(t, err)
	turn, err := eng.CreateTurn(first(turned), s.ID, &lt.CreateTurnRequest{Input: "more"})
	require.NoError(t, err)
	_, err = eng.SteerSession(first(steered), s.ID, &lt.SteerRequest{Input: "shorter"})
	require.NoError(t, err)

	free.Store(10 << 20)
	again, err := eng.CreateSession(retry(made), &lt.CreateSessionRequest{AgentSpec: sp, Input: "hi"})
	require.NoError(t, err, "the retry of the creation")
	require.Equal(t, s.ID, again.ID)
	againFork, err := eng.ForkSession(retry(forked), s.ID, &lt.ForkRequest{CheckpointID: cps[len(cps)-1].ID}, "")
	require.NoError(t, err, "the retry of the fork")
	require.Equal(t, f.ID, againFork.ID)
	againTurn, err := eng.CreateTurn(retry(turned), s.ID, &lt.CreateTurnRequest{Input: "more"})
	require.NoError(t, err, "the retry of the turn")
	require.Equal(t, turn.ID, againTurn.ID)
	_, err = eng.SteerSession(retry(steered), s.ID, &lt.SteerRequest{Input: "shorter"})
	require.NoError(t, err, "the retry of the steer")

	_, err = eng.CreateTurn(retry(seed()), s.ID, &lt.CreateTurnRequest{Input: "a new one"})
	require.Equal(t, http.StatusInsufficientStorage, apierror.From(err).Status, "a request no run made: %v", err)
}

// TestReviewThatStartsATurnWithTheDiskLow: below the floor a review with
// continue (a rejection that starts a turn) is a 507 and writes nothing,
// as a new turn is; a review that starts none is taken, and so is the
// rerun of a review with continue its first run made.
func TestReviewThatStartsATurnWithTheDiskLow(t *testing.T) {
	t.Parallel()
	eng, free := lowFloorEngine(t)
	ctx := context.Background()
	no := false
	s, err := eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec(t, `[{"text":"v1"},{"text":"v2"}]`), Input: "draft"})
	require.NoError(t, err)
	waitSessionStatus(t, eng, s.ID, lt.SessionIdle)
	seed := seedAt(spaceEngineStart)
	_, err = eng.ReviewSession(engine.WithCreationSeed(ctx, seed, false), s.ID, &lt.ReviewRequest{Accepted: &no, Note: "shorter", Continue: true})
	require.NoError(t, err)
	waitSessionStatus(t, eng, s.ID, lt.SessionIdle)

	free.Store(10 << 20)
	_, err = eng.ReviewSession(engine.WithCreationSeed(ctx, seed, true), s.ID, &lt.ReviewRequest{Accepted: &no, Note: "shorter", Continue: true})
	require.NoError(t, err, "the rerun of the review its first run made")
	_, err = eng.ReviewSession(ctx, s.ID, &lt.ReviewRequest{Accepted: &no, Note: "shorter still", Continue: true})
	require.Equal(t, http.StatusInsufficientStorage, apierror.From(err).Status, "a review that starts a turn: %v", err)
	evs, err := eng.ListEvents(ctx, s.ID, 0, 1000)
	require.NoError(t, err)
	reviews := 0
	for _, ev := range evs {
		if ev.Type == lt.EventSessionReviewed {
			reviews++
		}
	}
	require.Equal(t, 1, reviews, "the refused review wrote nothing")
	yes := true
	_, err = eng.ReviewSession(ctx, s.ID, &lt.ReviewRequest{Accepted: &yes})
	require.NoError(t, err, "a review that starts no turn")
}
