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
}

func (b *oneRunner) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	if p.Runner == nil {
		return b.Backend.Open(ctx, p)
	}
	if !b.connected.Load() {
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
	e, err := New(st, &Config{
		WorkspaceRoot: filepath.Join(p.dir, "workspaces"), NodeID: "node-a", Workspaces: p.spaces, SnapshotCache: p.cache, Environments: backend,
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)},
	}) // not started: this test is the worker
	require.NoError(t, err)
	s, lease := claimNewSession(t, e, st, &lt.AgentSpec{
		Model:       lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"done"}]`)},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"gpu"}}},
	})

	// No runner: the session parks on its environment_connection action.
	r, err := e.newRunner(ctx, lease)
	require.NoError(t, err)
	for done := false; !done; {
		done, err = r.tick(ctx)
		require.NoError(t, err)
	}
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
