package engine

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// creationLog records the creations the store was asked for.
type creationLog struct {
	store.Store
	mu        sync.Mutex
	creations []*store.SessionCreateParams
}

func (c *creationLog) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	evs, err := c.Store.SessionCreate(ctx, p)
	if err == nil {
		c.mu.Lock()
		c.creations = append(c.creations, p)
		c.mu.Unlock()
	}
	return evs, err
}

// TestRunnerWritesTheCreationAloneBeforeALook: a new session whose
// environment could not be set up has its first tick look at the session
// before it fails the turn (firstRequestOnlyDue is false): its runner
// writes the creation alone first, under its lease, and the turn then
// fails, saying why, in the session so written.
func TestRunnerWritesTheCreationAloneBeforeALook(t *testing.T) {
	ctx := context.Background()
	p := newLocalParts(t)
	log := &creationLog{Store: p.st}
	e, err := New(log, &Config{
		WorkspaceRoot: filepath.Join(p.dir, "workspaces"), NodeID: "node-a", Workspaces: p.spaces, SnapshotCache: p.cache,
		Environments: &failingOpens{Backend: p.local, fail: 1},
		Providers:    map[string]model.Provider{"scripted": scripted.New(nil)},
		// The runner, not its creator, writes the creation.
		createJoinWait: time.Hour,
	})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})
	s, err := e.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: []byte(`[{"text":"never asked"}]`)}},
		Input:     "go",
	})
	require.NoError(t, err)
	log.mu.Lock()
	require.Len(t, log.creations, 1)
	first := log.creations[0]
	log.mu.Unlock()
	require.NotNil(t, first.Claim, "leased to its runner")
	var types []string
	for _, ev := range first.Events {
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{lt.EventSessionCreated, lt.EventTurnCreated}, types, "the creation alone")

	require.Eventually(t, func() bool {
		v, err := e.GetSession(ctx, s.ID)
		require.NoError(t, err)
		return v.Status == lt.SessionFailed
	}, 10*time.Second, 2*time.Millisecond)
	evs, err := p.st.EventList(ctx, s.ID, 0, 100)
	require.NoError(t, err)
	var failed []string
	for _, ev := range evs {
		if ev.Type == lt.EventTurnFailed {
			var d lt.TurnFailedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			failed = append(failed, d.Error)
		}
	}
	require.Equal(t, []string{"the session's environment could not be set up: the proxy cannot start"}, failed,
		"the turn failed in the session written alone")
}
