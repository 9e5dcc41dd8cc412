package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestWriteAfterTheAnswersFlush: as TestCancelAfterTheAnswersFlush, with
// a steer, a pause, a signal, a constraint or a follow-up turn landing in
// the window between readSteers' read and endTurn's append.
func TestWriteAfterTheAnswersFlush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, api *engine.Engine, id string) error
		want  lt.SessionStatus
		calls int
	}{
		{"steer", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.SteerSession(ctx, id, &lt.SteerRequest{Input: "shorter"})
			return err
		}, lt.SessionIdle, 2},
		{"pause", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.PauseSession(ctx, id, &lt.PauseRequest{Reason: "hold"})
			return err
		}, lt.SessionPaused, 1},
		{"signal", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.SendSignal(ctx, id, &lt.SignalRequest{Name: "ping", Payload: json.RawMessage(`{}`)})
			return err
		}, lt.SessionIdle, 1},
		{"constraint", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.AddConstraint(ctx, id, &lt.AddConstraintRequest{Constraint: "Be brief."})
			return err
		}, lt.SessionIdle, 1},
		{"follow-up", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.CreateTurn(ctx, id, &lt.CreateTurnRequest{Input: "again"})
			return err
		}, lt.SessionIdle, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hooked := &writesAroundLooks{}
			h, p := constraintFirstHarness(t, hooked, hooked, func(api *engine.Engine) {
				hooked.unseen = func(id string) { require.NoError(t, tc.write(context.Background(), api, id)) }
			})
			s := create(t, h, spec(t, `[{"text":"the report"},{"text":"the report, shorter"}]`), nil)
			s = h.waitStatus(s.ID, tc.want)
			if tc.name == "follow-up" {
				waitEvents(t, h, s.ID, lt.EventTurnCompleted, 2)
				s = h.waitStatus(s.ID, lt.SessionIdle)
			}
			require.GreaterOrEqual(t, hooked.looks.Load(), int64(2))
			require.Len(t, p.sent(), tc.calls)
			if tc.name == "pause" {
				require.Empty(t, events(t, h, s.ID, lt.EventTurnCompleted))
				_, err := h.eng.ResumeSession(context.Background(), s.ID, nil)
				require.NoError(t, err)
				s = h.waitStatus(s.ID, lt.SessionIdle)
				require.Len(t, p.sent(), 1, "the answer is not asked for again")
			}
			require.Len(t, events(t, h, s.ID, lt.EventModelResponded), tc.calls, "each answer once")
			checkJournal(t, h.store, s.ID)
		})
	}
}

// pauseAtFlush: once armed and after the first look (which saw a
// constraint), another node asks for a pause just before the runner's
// append that carries the final answer (readSteers' flush): the flush
// merges it.
type pauseAtFlush struct {
	writesAroundLooks
	once  sync.Once
	pause func(id string)
	fired atomic.Bool
}

func (s *pauseAtFlush) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if s.looks.Load() == 1 {
		for _, ev := range p.Events {
			if ev.Type == lt.EventModelResponded {
				s.once.Do(func() { s.pause(p.SessionID); s.fired.Store(true) })
			}
		}
	}
	return s.writesAroundLooks.Store.EventAppend(ctx, p)
}

// TestPauseMergedByTheAnswersFlushParksTheTurn: a pause that the answer's
// flush merges (the path without the fold) parks the session with the
// turn unfinished, as on the fold path; the turn ended completed, and the
// pause whose client got a 200 came to nothing.
func TestPauseMergedByTheAnswersFlushParksTheTurn(t *testing.T) {
	hooked := &pauseAtFlush{}
	h, _ := constraintFirstHarness(t, &hooked.writesAroundLooks, hooked, func(api *engine.Engine) {
		hooked.pause = func(id string) {
			_, err := api.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "hold"})
			require.NoError(t, err)
		}
	})
	s := create(t, h, spec(t, `[{"text":"the report"}]`), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionPaused)
	require.True(t, hooked.fired.Load())
	require.Equal(t, lt.SessionPaused, s.Status, "a pause accepted before the turn's end parks it")
	require.Empty(t, events(t, h, s.ID, lt.EventTurnCompleted))
	checkJournal(t, h.store, s.ID)
}

// TestVerificationAfterASoftLimitAsksFirst: a final answer that reaches a soft limit
// asks before it is verified; approved, the answer is verified (not asked
// for again) and the turn completes.
func TestVerificationAfterASoftLimitAsksFirst(t *testing.T) {
	ctx := context.Background()
	const met = `{"criteria":[{"criterion":"mentions ACME","met":true,"reason":"it does"}]}`
	p := &planProvider{plan: []model.Response{{Text: "ACME."}, {Text: "again"}}, verdicts: []string{met}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}}, Input: "brief", AcceptanceCriteria: []string{"mentions ACME"},
		Budget: &lt.Budget{SoftModelCalls: 1, MaxModelCalls: 5},
	})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	require.Equal(t, lt.ActionBudget, s.RequiredActions[0].Type)
	require.Empty(t, events(t, h, s.ID, lt.EventAcceptanceVerified))
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: "approve"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Len(t, events(t, h, s.ID, lt.EventModelResponded), 1)
	require.Len(t, events(t, h, s.ID, lt.EventAcceptanceVerified), 1)
	require.Equal(t, int64(2), s.Usage.ModelCalls)
	checkJournal(t, h.store, s.ID)
}

// constraintFirstHarness is a harness whose first look at a session sees a
// constraint another node pinned, so that a final answer takes the path
// without the fold (made durable, then the session read again). looks is
// the store's hooks, outer the store the engine gets (looks itself, or a
// store wrapping it); wire sets looks' other hooks, given the API node.
// A call's watcher of controls looks too when its poll ticks: an hour, so
// that only the runner's ticks look.
func constraintFirstHarness(t *testing.T, looks *writesAroundLooks, outer store.Store, wire func(api *engine.Engine)) (*harness, *gatedScripted) {
	t.Helper()
	p := newGatedScripted()
	p.open()
	h := newHarnessConfigured(t, armingProvider{gatedScripted: p, armed: &looks.armed}, func(h *harness) store.Store {
		api := apiNode(t, h, p)
		looks.Store = h.store
		looks.seen = func(id string) {
			_, err := api.AddConstraint(context.Background(), id, &lt.AddConstraintRequest{Constraint: "Cite every source."})
			require.NoError(t, err)
		}
		looks.unseen = func(string) {}
		wire(api)
		return outer
	}, func(c *engine.Config) { c.PollInterval = time.Hour })
	return h, p
}
