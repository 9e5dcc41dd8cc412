package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// loseSpawnRecord is the parent's store: the first append that would
// record a sub-agent's spawn fails as if the database went away, after
// cancelling the parent (a person's cancel that landed in that moment).
// The child the spawn created is in the store; the parent's journal must
// still reach it.
type loseSpawnRecord struct {
	store.Store
	once   sync.Once
	cancel func(sessionID string)
}

func (s *loseSpawnRecord) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	for _, ev := range p.Events {
		if ev.Type != lt.EventSubagentSpawned {
			continue
		}
		lost := false
		s.once.Do(func() {
			s.cancel(p.SessionID)
			lost = true
		})
		if lost {
			return nil, fmt.Errorf("%w: the test's database went away", store.ErrUnavailable)
		}
	}
	return s.Store.EventAppend(ctx, p)
}

// TestCancelReachesAChildWhoseSpawnWasNotRecorded: a parent creates a
// sub-agent, and the append that records the spawn is lost; the parent
// starts over from its journal with a cancel waiting. The child runs all
// the same (it is a session of its own): the parent's cancel must reach
// it, as it reaches the children its journal records, and the spawn is
// not made a second time.
func TestCancelReachesAChildWhoseSpawnWasNotRecorded(t *testing.T) {
	var h *harness
	h = newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
		return &loseSpawnRecord{Store: h.store, cancel: func(id string) {
			if _, err := h.eng.CancelSession(context.Background(), id, &lt.CancelRequest{Reason: "enough"}); err != nil {
				t.Errorf("cancel: %v", err) // on the runner's goroutine
			}
		}}
	}, func(*engine.Config) {})
	child := childSpec(script(t, map[string]any{"tool_calls": []any{toolCall("wait_for_signal", map[string]any{"name": "never"})}}), "wait_for_signal")
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "wait forever"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "unreachable"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	s := create(t, h, parent, nil)
	h.waitStatus(s.ID, lt.SessionCancelled)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1, "one child, made once")
	h.waitStatus(kids[0].ID, lt.SessionCancelled)
	checkJournal(t, h.store, s.ID)
}

// stopAtChild is a node's store that, once a sub-agent's session is
// created, holds the creating worker there until its node stops: the node
// dies between the child's creation and the append recording the spawn.
type stopAtChild struct {
	store.Store
	input   string // the input of the child it stops at
	created chan struct{}
	once    sync.Once
}

func (s *stopAtChild) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	evs, err := s.Store.SessionCreate(ctx, p)
	if err != nil || !slices.ContainsFunc(p.Events, func(ev store.NewEvent) bool {
		return ev.Type == lt.EventSessionCreated && strings.Contains(string(ev.Data), s.input)
	}) {
		return evs, err
	}
	held := false
	s.once.Do(func() { held = true })
	if !held {
		return evs, err
	}
	close(s.created)
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// TestTurnEndReachesAChildWhoseParentsNodeDied: the node running a parent
// dies just after creating its second sub-agent, before the spawn is
// recorded, and the parent's turn ends meanwhile (a person's cancel, or
// its timeout). The node that takes the parent over must find the child
// (the spawn call was journaled before the child existed) and end it with
// its parent's turn: a child nobody's journal named would run on. (The
// first spawn of a root made its journal durable anyway, opening the
// tree's budget ledger.)
func TestTurnEndReachesAChildWhoseParentsNodeDied(t *testing.T) {
	for _, end := range []string{"cancel", "timeout"} {
		t.Run(end, func(t *testing.T) {
			crash := &stopAtChild{input: "wait forever", created: make(chan struct{})}
			h := newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
				crash.Store = h.store
				return crash
			}, func(*engine.Config) {})
			ctx := context.Background()
			quick := childSpec(script(t, map[string]any{"text": "done"}))
			child := childSpec(script(t, map[string]any{"tool_calls": []any{toolCall("wait_for_signal", map[string]any{"name": "never"})}}), "wait_for_signal")
			parent := spec(t, script(t,
				map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": quick, "input": "answer at once"})}},
				map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "wait forever"})}},
				map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
				map[string]any{"text": "unreachable"},
			), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
			parent.TurnTimeoutSeconds = 20
			s := create(t, h, parent, nil)
			select {
			case <-crash.created:
			case <-time.After(testTimeout):
				t.Fatal("no sub-agent was created")
			}
			if end == "cancel" {
				_, err := h.eng.CancelSession(ctx, s.ID, &lt.CancelRequest{Reason: "enough"})
				require.NoError(t, err)
			}
			hard, stop := context.WithCancel(ctx)
			stop()
			require.NoError(t, h.eng.Stop(hard)) // node A dies holding the lease

			h.start("node-b")
			h.clock.Advance(31 * time.Second) // past the 30 s default lease, and the turn's 20 s
			if end == "cancel" {
				h.waitStatus(s.ID, lt.SessionCancelled)
			} else {
				h.waitStatus(s.ID, lt.SessionFailed)
			}
			kids := children(t, h, s.ID)
			require.Len(t, kids, 2, "two children, each made once")
			for _, k := range kids {
				if k.Input == "wait forever" {
					h.waitStatus(k.ID, lt.SessionCancelled)
				}
			}
			require.Len(t, events(t, h, s.ID, lt.EventSubagentSpawned), 2, "the second spawn recorded by the node that took over")
			checkJournal(t, h.store, s.ID)
		})
	}
}
