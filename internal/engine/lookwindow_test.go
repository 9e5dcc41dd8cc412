package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// writeBeforeSecondRequest is the runner's store: just before the append
// of the second step's model request, another node writes to the session,
// once. The runner took no look at the session before that request (the
// tick after a step's checkpoint): the write lands in the window the look
// used to close.
type writeBeforeSecondRequest struct {
	store.Store
	once  sync.Once
	write func(sessionID string)
}

func (s *writeBeforeSecondRequest) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	for _, ev := range p.Events {
		var d lt.ModelRequestedData
		if ev.Type == lt.EventModelRequested && json.Unmarshal(ev.Data, &d) == nil && d.Step == 2 && d.Purpose == "" {
			s.once.Do(func() { s.write(p.SessionID) })
		}
	}
	return s.Store.EventAppend(ctx, p)
}

// newHarnessWithAPI is newHarnessThrough with an API node (apiNode) whose
// providers' "scripted" is apiModel.
func newHarnessWithAPI(t *testing.T, p, apiModel model.Provider, wrap func(h *harness, api *engine.Engine) store.Store) *harness {
	t.Helper()
	return newHarnessThrough(t, p, 0, func(h *harness) store.Store {
		return wrap(h, apiNode(t, h, apiModel))
	})
}

// apiNode is an API node (not started: it runs no session) over the
// harness's store itself, whose writes come from another node than the
// runner's; p is its providers' "scripted".
func apiNode(t *testing.T, h *harness, p model.Provider) *engine.Engine {
	t.Helper()
	api, err := engine.New(h.store, &engine.Config{
		WorkspaceRoot: filepath.Join(h.dir, "workspaces"), NodeID: "api", Clock: h.clock,
		Providers: map[string]model.Provider{"scripted": p},
	})
	require.NoError(t, err)
	return api
}

// TestWriteBeforeAnUnlookedModelRequest: a steer, a cancel or a pause
// journaled by another node after a step's checkpoint, as the runner
// appends the next step's model request without having looked at the
// session. The request fails to append and is dropped unsent; the step's
// events are kept; the runner goes back to its tick: the model reads the
// steer in the call it makes, the cancel ends the turn and the pause
// parks the session, both before the model is called again.
func TestWriteBeforeAnUnlookedModelRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		write  func(ctx context.Context, api *engine.Engine, id string) error
		status lt.SessionStatus
		check  func(t *testing.T, h *harness, id string, reqs []*model.Request)
	}{
		{"steer", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.SteerSession(ctx, id, &lt.SteerRequest{Input: "Write it in English."})
			return err
		}, lt.SessionIdle, func(t *testing.T, h *harness, id string, reqs []*model.Request) {
			require.Len(t, reqs, 2, "the dropped request was never sent")
			last := reqs[1].Messages
			require.Equal(t, user("Write it in English."), last[len(last)-1])
			turns, err := h.eng.ListTurns(context.Background(), id)
			require.NoError(t, err)
			require.Len(t, turns, 1)
			require.Equal(t, "the listing, in English", turns[0].Output)
			require.Len(t, events(t, h, id, lt.EventModelRequested), 2)
		}},
		{"cancel", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.CancelSession(ctx, id, &lt.CancelRequest{Reason: "enough"})
			return err
		}, lt.SessionCancelled, func(t *testing.T, h *harness, id string, reqs []*model.Request) {
			require.Len(t, reqs, 1, "the model is not called after the cancel")
			require.Len(t, events(t, h, id, lt.EventModelRequested), 1)
			require.Len(t, events(t, h, id, lt.EventToolCompleted), 1, "the step's call is kept")
			require.Len(t, events(t, h, id, lt.EventTurnCancelled), 1)
		}},
		{"pause", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.PauseSession(ctx, id, &lt.PauseRequest{Reason: "look first"})
			return err
		}, lt.SessionPaused, func(t *testing.T, h *harness, id string, reqs []*model.Request) {
			require.Len(t, reqs, 1, "the model is not called while paused")
			require.Len(t, events(t, h, id, lt.EventModelRequested), 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newGatedScripted()
			p.open()
			hooked := &writeBeforeSecondRequest{}
			h := newHarnessWithAPI(t, p, p, func(h *harness, api *engine.Engine) store.Store {
				hooked.Store = h.store
				hooked.write = func(id string) {
					require.NoError(t, tc.write(context.Background(), api, id))
				}
				return hooked
			})
			s := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"the listing, in English"}]`,
				lt.ToolSpec{Name: "list_files"}), nil)
			s = h.waitStatus(s.ID, tc.status, lt.SessionIdle, lt.SessionCancelled, lt.SessionFailed, lt.SessionPaused)
			require.Equal(t, tc.status, s.Status)
			tc.check(t, h, s.ID, p.sent())
			checkJournal(t, h.store, s.ID)
		})
	}
}
