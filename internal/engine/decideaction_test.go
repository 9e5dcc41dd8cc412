package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// readCounter counts the reads of session and action rows.
type readCounter struct {
	store.Store
	sessions, actions atomic.Int64
}

func (c *readCounter) SessionGet(ctx context.Context, id string) (*store.SessionRow, error) {
	c.sessions.Add(1)
	return c.Store.SessionGet(ctx, id)
}

func (c *readCounter) ActionGet(ctx context.Context, sessionID, actionID string) (*store.DocRow, error) {
	c.actions.Add(1)
	return c.Store.ActionGet(ctx, sessionID, actionID)
}

type requestKey struct{}

// ctxVault is a vault without secrets that records the request each
// Redactor call came under (the value of requestKey in its context). Only
// Redactor is called for a session that names no secrets.
type ctxVault struct {
	engine.Vault
	mu       sync.Mutex
	requests []any
}

func (v *ctxVault) Redactor(ctx context.Context) (*redact.Redactor, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.requests = append(v.requests, ctx.Value(requestKey{}))
	return redact.New(nil), nil
}

func (v *ctxVault) Invalidate() {}

func (v *ctxVault) seen() []any {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]any(nil), v.requests...)
}

// TestDecideActionReadsTheSessionOnce: a decision reads the session's row
// once (its state and its pinned spec), returns the resolved action as it
// is stored without reading it back, and the events it writes are
// redacted under the request's context. A decision repeated on the
// resolved action reads the session once and the stored action once.
func TestDecideActionReadsTheSessionOnce(t *testing.T) {
	p := &planProvider{plan: []model.Response{call("lookup", `{"q":"x"}`), {Text: "done"}}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{
		{Name: "lookup", Type: "function", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
	}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	actID := s.RequiredActions[0].ID

	// An API-side engine (not started: it runs no session) over a store
	// that counts its reads.
	counted := &readCounter{Store: h.store}
	vault := &ctxVault{}
	api, err := engine.New(counted, &engine.Config{
		WorkspaceRoot: filepath.Join(h.dir, "workspaces"), NodeID: "api", Clock: h.clock,
		Providers: map[string]model.Provider{"plan": p}, Vault: vault,
	})
	require.NoError(t, err)

	ctx := context.WithValue(t.Context(), requestKey{}, "decide")
	d := &lt.Decision{Output: json.RawMessage(`"found"`)}
	got, err := api.DecideAction(ctx, s.ID, actID, d)
	require.NoError(t, err)
	require.Equal(t, int64(1), counted.sessions.Load(), "one read of the session")
	require.Equal(t, int64(0), counted.actions.Load(), "the resolved action is the row the decision wrote")
	require.NotEmpty(t, vault.seen())
	for _, req := range vault.seen() {
		require.Equal(t, "decide", req, "the redactor is read under the request's context")
	}

	row, err := h.store.ActionGet(ctx, s.ID, actID)
	require.NoError(t, err)
	var stored lt.Action
	require.NoError(t, json.Unmarshal(row.Doc, &stored))
	require.Equal(t, lt.ActionResolved, stored.Status)
	require.Equal(t, stored, *got)

	again, err := api.DecideAction(ctx, s.ID, actID, d)
	require.NoError(t, err)
	require.Equal(t, stored, *again)
	require.Equal(t, int64(2), counted.sessions.Load())
	require.Equal(t, int64(1), counted.actions.Load())

	h.waitStatus(s.ID, lt.SessionIdle)
}
