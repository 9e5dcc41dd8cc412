package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// oneRunner stands for a node's router with one runner, box1: while it is
// not connected a session that asks for a runner finds none
// (ErrUnavailable); once it is, the real local environment opens. It
// counts the environments open.
type oneRunner struct {
	environment.Backend
	connected atomic.Bool
	live      atomic.Int32
	// afterRefusal, when set, runs once right after an open found no
	// runner: the runner connecting at that moment.
	afterRefusal func()
}

func (b *oneRunner) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	if p.Runner == nil {
		return b.Backend.Open(ctx, p)
	}
	if !b.connected.Load() {
		if f := b.afterRefusal; f != nil {
			defer f()
			b.afterRefusal = nil
		}
		return nil, fmt.Errorf("open environment of session %s: %w (no matching runner is connected)", p.Session, environment.ErrUnavailable)
	}
	local := *p
	local.Runner = nil
	env, err := b.Backend.Open(ctx, &local)
	if err != nil {
		return nil, err
	}
	b.live.Add(1)
	return &countedEnv{Environment: env, b: b}, nil
}

type countedEnv struct {
	environment.Environment
	b      *oneRunner
	closed atomic.Bool
}

func (e *countedEnv) Close() error {
	if e.closed.CompareAndSwap(false, true) {
		e.b.live.Add(-1)
	}
	return e.Environment.Close()
}

// newWorkerlessEngine is an engine on p with environments from backend,
// not started: the test is its worker (newRunner, tick).
func newWorkerlessEngine(t *testing.T, p *localParts, backend environment.Backend) *Engine {
	t.Helper()
	e, err := New(p.st, &Config{
		WorkspaceRoot: filepath.Join(p.dir, "workspaces"), NodeID: "node-a", Workspaces: p.spaces, SnapshotCache: p.cache, Environments: backend,
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)},
	})
	require.NoError(t, err)
	return e
}

// tickUntilDone runs r's ticks until it is done with the session, as
// runSession would, failing on a tick's error.
func tickUntilDone(t *testing.T, r *runner) {
	t.Helper()
	for done := false; !done; {
		var err error
		done, err = r.tick(t.Context())
		require.NoError(t, err)
	}
}

// TestAwaitEnvironmentKeepsTheClaimsEnvironment: a session waiting for a
// runner (environment_connection) is claimed for something else than the
// wake after its runner connected, so the claim's own open found the
// runner: awaitEnvironment resolves the action with that environment
// rather than opening a second one beside it (left open).
func TestAwaitEnvironmentKeepsTheClaimsEnvironment(t *testing.T) {
	ctx := context.Background()
	p := newLocalParts(t)
	st := p.st
	backend := &oneRunner{Backend: p.local}
	e := newWorkerlessEngine(t, p, backend)
	s, lease := claimNewSession(t, e, st, &lt.AgentSpec{
		Model:       lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"done"}]`)},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"gpu"}}},
	})

	// No runner: the session parks on its environment_connection action.
	r, err := e.newRunner(ctx, lease)
	require.NoError(t, err)
	tickUntilDone(t, r)
	r.env.close()
	require.NotNil(t, pendingOfType(r.st.Pending, lt.ActionEnvironmentConnection))

	// The runner connects; a claim that is not the wake opens on it.
	backend.connected.Store(true)
	r, err = e.newRunner(ctx, store.Lease{SessionID: s.ID, Owner: "node-a", Epoch: lease.Epoch})
	require.NoError(t, err)
	require.EqualValues(t, 1, backend.live.Load())
	first := r.env.env
	_, err = r.tick(ctx)
	require.NoError(t, err)
	require.Nil(t, pendingOfType(r.st.Pending, lt.ActionEnvironmentConnection), "resolved: the runner is connected")
	require.Same(t, first, r.env.env, "the claim's environment is kept")
	require.EqualValues(t, 1, backend.live.Load(), "no second environment was opened")
	r.env.close()
	require.Zero(t, backend.live.Load())
}

// TestRunnerConnectsBetweenTheRecheckAndThePark: the claim's second look
// for a runner (awaitEnvironment) finds none, and the runner connects
// right then: its RunnerConnected resolves the action before the claim's
// park, which then finds the session runnable and goes on. The turn runs
// in an environment opened on the runner, not in none (which failed the
// session: "the session's environment is not open").
func TestRunnerConnectsBetweenTheRecheckAndThePark(t *testing.T) {
	ctx := context.Background()
	p := newLocalParts(t)
	backend := &oneRunner{Backend: p.local}
	e := newWorkerlessEngine(t, p, backend)
	s, lease := claimNewSession(t, e, p.st, &lt.AgentSpec{
		Model:       lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"done"}]`)},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"gpu"}}},
	})

	r, err := e.newRunner(ctx, lease) // its open finds no runner
	require.NoError(t, err)
	backend.afterRefusal = func() { // the recheck's open finds none either
		backend.connected.Store(true)
		woke, err := e.RunnerConnected(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"})
		require.NoError(t, err)
		require.Equal(t, 1, woke)
	}
	tickUntilDone(t, r)
	r.env.close()
	require.Nil(t, backend.afterRefusal, "the runner connected during the recheck")
	require.Zero(t, backend.live.Load())

	row, err := p.st.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, string(lt.SessionIdle), row.Status, "the turn ran on the runner")
	evs, err := p.st.EventList(ctx, s.ID, 0, 1000)
	require.NoError(t, err)
	var resolved, completed bool
	for _, ev := range evs {
		resolved = resolved || ev.Type == lt.EventActionResolved
		completed = completed || ev.Type == lt.EventTurnCompleted
	}
	require.True(t, resolved, "the runner's connection resolved the action")
	require.True(t, completed)
}
