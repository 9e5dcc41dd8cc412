package app_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/engine"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestCallerIsTheActor: the caller a transport puts in the context is the
// actor the engine journals, so a decision made through the App carries
// the caller's key, name and role with no parameter of its own; a context
// without a caller carries no actor either.
func TestCallerIsTheActor(t *testing.T) {
	t.Parallel()
	alice := app.Caller{KeyID: "key_alice", Name: "alice", Role: lt.RoleOperator, Project: "default"}
	got, ok := engine.ActorFrom(app.WithCaller(context.Background(), alice))
	require.True(t, ok)
	require.Equal(t, lt.Actor{KeyID: "key_alice", Name: "alice", Role: lt.RoleOperator}, got)
	_, ok = engine.ActorFrom(context.Background())
	require.False(t, ok)

	f := newFixture(t)
	ctx := app.WithCaller(t.Context(), alice)
	var req lt.CreateSessionRequest
	require.NoError(t, json.Unmarshal([]byte(`{"agent_spec": {"model": {"provider": "scripted", "script": [{"text": "hi"}]}}, "input": "go"}`), &req))
	s, err := f.app.CreateSession(ctx, &req)
	require.NoError(t, err)
	require.Equal(t, &lt.Actor{KeyID: "key_alice", Name: "alice", Role: lt.RoleOperator}, s.CreatedBy)
	f.waitIdle(s.ID)
	_, err = f.app.Review(f.ctx, s.ID, &lt.ReviewRequest{Accepted: new(true)})
	require.NoError(t, err)
	evs := f.journal(s.ID)
	last := evs[len(evs)-1]
	require.Equal(t, lt.EventSessionReviewed, last.Type)
	var d lt.SessionReviewedData
	require.NoError(t, json.Unmarshal(last.Data, &d))
	require.Equal(t, &lt.Actor{Name: "library", Role: lt.RoleAdmin}, d.Actor, "the fixture calls as the library")
}
