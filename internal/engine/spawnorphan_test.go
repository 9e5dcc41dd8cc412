package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// onceBeforeAppend is a parent's store that, before the first append
// holding an event match accepts, runs before (a person's control landing
// in that moment); with lose set, that append then fails as if the
// database went away.
type onceBeforeAppend struct {
	store.Store
	match  func(store.NewEvent) bool
	before func(sessionID string)
	lose   bool
	once   sync.Once
}

func (s *onceBeforeAppend) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if slices.ContainsFunc(p.Events, s.match) {
		first := false
		s.once.Do(func() {
			s.before(p.SessionID)
			first = true
		})
		if first && s.lose {
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
		// The append recording the spawn is lost, as a cancel lands.
		return &onceBeforeAppend{Store: h.store, lose: true,
			match: func(ev store.NewEvent) bool { return ev.Type == lt.EventSubagentSpawned },
			before: func(id string) {
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
	waitReports(t, h, s.ID, kids)
	checkJournal(t, h.store, s.ID)
}

// TestNoRunnerTurnEndReachesAChildWhoseSpawnWasNotRecorded: a root
// creates a sub-agent, which spawns a grandchild and waits for it; the
// root's append recording the spawn is lost, and meanwhile its stored
// spec becomes one the engine refuses. Its turn then ends without a
// runner (endWithoutRunner), which must find the child as a runner would
// (the spawn call was journaled before the child existed), record its
// spawn, and ask it to stop: a child no journal named would run on, and
// its own sub-agent with it, spending the tree's budget in the shared
// workspace after the root's turn ended.
func TestNoRunnerTurnEndReachesAChildWhoseSpawnWasNotRecorded(t *testing.T) {
	reached, goOn := make(chan struct{}), make(chan struct{})
	var release sync.Once
	defer release.Do(func() { close(goOn) }) // a failing test does not hold the runner for ever
	h := newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
		// The append recording the child's spawn waits for the test,
		// then is lost.
		return &onceBeforeAppend{Store: h.store, lose: true,
			match: func(ev store.NewEvent) bool {
				return ev.Type == lt.EventSubagentSpawned && strings.Contains(string(ev.Data), `"input":"delegate"`)
			},
			before: func(string) { close(reached); <-goOn }}
	}, func(*engine.Config) {})
	ctx := context.Background()
	root := create(t, h, delegatingTree(t), nil)
	select {
	case <-reached:
	case <-time.After(testTimeout):
		t.Fatal("the root never came to record its spawn")
	}
	kid, grand := waitingTree(t, h, root.ID)
	require.Empty(t, events(t, h, root.ID, lt.EventSubagentSpawned), "the root's journal does not name the child yet")
	refuseStoredSpec(t, h, root.ID)
	release.Do(func() { close(goOn) })

	r := h.waitStatus(root.ID, lt.SessionFailed)
	require.Equal(t, lt.StopInternal, *r.StopReason)
	h.waitStatus(kid.ID, lt.SessionCancelled)
	h.waitStatus(grand.ID, lt.SessionCancelled)

	// The root's journal says what a runner's would: the spawn made in
	// the turn (not a call refused as not run), then the child asked to
	// stop once the turn ended.
	spawned := events(t, h, root.ID, lt.EventSubagentSpawned)
	require.Len(t, spawned, 1, "recorded once")
	require.Equal(t, kid.ID, data[lt.SubagentSpawnedData](t, spawned[0]).ChildID)
	for _, ev := range events(t, h, root.ID, lt.EventToolFailed) {
		require.NotEqual(t, "spawn_agent", data[lt.ToolFailedData](t, ev).Tool, "a spawn whose child exists is not refused as not run")
	}
	cancels := events(t, h, root.ID, lt.EventSubagentCancelRequested)
	require.Len(t, cancels, 1)
	require.Equal(t, kid.ID, data[lt.SubagentCancelRequestedData](t, cancels[0]).ChildID)
	require.Less(t, spawned[0].Seq, seqOf(t, h, root.ID, lt.EventTurnFailed))
	require.Less(t, seqOf(t, h, root.ID, lt.EventTurnFailed), cancels[0].Seq)

	waitReports(t, h, root.ID, []lt.Session{kid})
	require.Equal(t, lt.TurnCancelled, data[lt.SubagentCompletedData](t, events(t, h, root.ID, lt.EventSubagentCompleted)[0]).Status)
	require.Eventually(t, func() bool { return len(events(t, h, grand.ID, lt.EventSubagentReported)) == 1 }, testTimeout, pollEvery)
	waitUntil(t, testTimeout, func() bool {
		row, err := h.store.SessionGet(ctx, root.ID)
		require.NoError(t, err)
		return !row.Runnable
	})
	for _, id := range []string{root.ID, kid.ID, grand.ID} {
		checkJournal(t, h.store, id)
	}
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
// recorded, and the parent's turn ends meanwhile: a person's cancel, its
// timeout, or (on the node that takes it over) an environment that cannot
// be set up. That node must find the child (the spawn call was journaled
// before the child existed) and end it with its parent's turn: a child no
// journal named would run on. (The first spawn of a root made its journal
// durable anyway, opening the tree's budget ledger.)
func TestTurnEndReachesAChildWhoseParentsNodeDied(t *testing.T) {
	for _, end := range []string{"cancel", "timeout", "environment"} {
		t.Run(end, func(t *testing.T) {
			crash := &stopAtChild{input: "wait forever", created: make(chan struct{})}
			v := &fakeVault{secrets: map[string]struct{ value, host string }{"API_TOKEN": {"v-123456789", "api.example.com"}}}
			h := newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
				crash.Store = h.store
				return crash
			}, func(c *engine.Config) { c.Vault = v })
			h.vault = v // node B's too
			ctx := context.Background()
			quick := childSpec(script(t, map[string]any{"text": "done"}))
			child := childSpec(script(t, map[string]any{"tool_calls": []any{toolCall("wait_for_signal", map[string]any{"name": "never"})}}), "wait_for_signal")
			parent := spec(t, script(t,
				map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": quick, "input": "answer at once"})}},
				map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "wait forever"})}},
				map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
				map[string]any{"text": "unreachable"},
			), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
			switch end {
			case "timeout":
				parent.TurnTimeoutSeconds = 20
			case "environment":
				parent.Environment = &lt.Environment{Secrets: []string{"API_TOKEN"}}
			}
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
			if end == "environment" {
				delete(v.secrets, "API_TOKEN") // node B cannot set the environment up
			}

			h.start("node-b")
			h.clock.Advance(31 * time.Second) // past the 30 s default lease (and the turn's 20 s)
			switch end {
			case "cancel":
				h.waitStatus(s.ID, lt.SessionCancelled)
			case "timeout":
				got := h.waitStatus(s.ID, lt.SessionFailed)
				require.Equal(t, lt.StopTimeout, *got.StopReason)
			case "environment":
				got := h.waitStatus(s.ID, lt.SessionFailed)
				require.Equal(t, lt.StopSandboxError, *got.StopReason)
			}
			kids := children(t, h, s.ID)
			require.Len(t, kids, 2, "two children, each made once")
			for _, k := range kids {
				if k.Input == "wait forever" {
					h.waitStatus(k.ID, lt.SessionCancelled)
				}
			}
			require.Len(t, events(t, h, s.ID, lt.EventSubagentSpawned), 2, "the second spawn recorded by the node that took over")
			waitReports(t, h, s.ID, kids)
			checkJournal(t, h.store, s.ID)
		})
	}
}

// waitReports waits until each child has reported its end to the parent
// and journaled that (subagent.reported, its last event): the parent's
// journal no longer grows.
func waitReports(t *testing.T, h *harness, parentID string, kids []lt.Session) {
	t.Helper()
	require.Eventually(t, func() bool {
		if len(events(t, h, parentID, lt.EventSubagentCompleted)) < len(kids) {
			return false
		}
		for _, k := range kids {
			if len(events(t, h, k.ID, lt.EventSubagentReported)) == 0 {
				return false
			}
		}
		return true
	}, testTimeout, pollEvery, "each child reported its end")
}

// TestControlReadBeforeAChildIsMade: a cancel or a pause answered as the
// spawn call is made durable is read by that append, and no child is made:
// a cancelled turn's spawn is refused, and a paused session's waits for
// the resume, then runs once.
func TestControlReadBeforeAChildIsMade(t *testing.T) {
	for _, control := range []string{"cancel", "pause"} {
		t.Run(control, func(t *testing.T) {
			var h *harness
			h = newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
				// Just before the append making the spawn call durable
				// (runSpawn's, before the child is created).
				return &onceBeforeAppend{Store: h.store,
					match: func(ev store.NewEvent) bool {
						return ev.Type == lt.EventToolRequested && strings.Contains(string(ev.Data), `"spawn_agent"`)
					},
					before: func(id string) {
						var err error
						if control == "cancel" {
							_, err = h.eng.CancelSession(context.Background(), id, &lt.CancelRequest{Reason: "enough"})
						} else {
							_, err = h.eng.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "hold"})
						}
						if err != nil {
							t.Errorf("%s: %v", control, err) // on the runner's goroutine
						}
					}}
			}, func(*engine.Config) {})
			s := create(t, h, spawnThenWait(t), nil)
			if control == "cancel" {
				s = requireCancelled(t, h, s.ID)
				require.Empty(t, children(t, h, s.ID), "no child made after the cancel was read")
				failed := events(t, h, s.ID, lt.EventToolFailed)
				require.Len(t, failed, 1)
				d := data[lt.ToolFailedData](t, failed[0])
				require.Equal(t, "spawn_agent", d.Tool)
				require.Equal(t, lt.RefusedTurnEnded, d.Refused)
				checkJournal(t, h.store, s.ID)
				return
			}
			s = h.waitStatus(s.ID, lt.SessionPaused)
			require.Empty(t, children(t, h, s.ID), "no child made while paused")
			resume(t, h, s.ID)
			s = h.waitStatus(s.ID, lt.SessionIdle)
			kids := children(t, h, s.ID)
			require.Len(t, kids, 1, "made once, after the resume")
			require.Less(t, seqOf(t, h, s.ID, lt.EventSessionResumed), seqOf(t, h, s.ID, lt.EventSubagentSpawned))
			waitReports(t, h, s.ID, kids)
			checkJournal(t, h.store, s.ID)
		})
	}
}

// cancelAfterLook is a store whose first SessionLastSeq of session id, once
// armed, answers the seq it read and then has a person cancel the session:
// the cancel lands just after a worker's look (readControls).
type cancelAfterLook struct {
	*onceBeforeAppend
	id    atomic.Value // string
	armed atomic.Bool
	fire  func(id string)
}

func (s *cancelAfterLook) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	seq, err := s.onceBeforeAppend.Store.SessionLastSeq(ctx, id)
	if want, _ := s.id.Load().(string); err == nil && id == want && s.armed.CompareAndSwap(true, false) {
		s.fire(id)
	}
	return seq, err
}

// TestCancelAfterTheLookBeforeASpawnOfAResumedSession: a session paused
// before its spawn call is resumed; its new runner takes its look, and a
// cancel is answered just after it. runSpawn's flush has nothing to append
// (the runner wrote nothing since it read the journal), so it reads nothing
// and the child is created after the cancel was answered.
func TestCancelAfterTheLookBeforeASpawnOfAResumedSession(t *testing.T) {
	var h *harness
	var hook *cancelAfterLook
	h = newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
		hook = &cancelAfterLook{onceBeforeAppend: &onceBeforeAppend{Store: h.store,
			match: func(ev store.NewEvent) bool {
				return ev.Type == lt.EventToolRequested && strings.Contains(string(ev.Data), `"spawn_agent"`)
			},
			before: func(id string) {
				if _, err := h.eng.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "hold"}); err != nil {
					t.Errorf("pause: %v", err)
				}
			}},
			fire: func(id string) {
				if _, err := h.eng.CancelSession(context.Background(), id, &lt.CancelRequest{Reason: "enough"}); err != nil {
					t.Errorf("cancel: %v", err)
				}
			}}
		return hook
	}, func(*engine.Config) {})
	s := create(t, h, spawnThenWait(t), nil)
	s = h.waitStatus(s.ID, lt.SessionPaused)
	require.Empty(t, children(t, h, s.ID))
	hook.id.Store(s.ID)
	hook.armed.Store(true)
	resume(t, h, s.ID)
	s = requireCancelled(t, h, s.ID)
	cancelSeq := seqOf(t, h, s.ID, lt.EventSessionCancelRequested)
	spawnSeq := seqOf(t, h, s.ID, lt.EventSubagentSpawned)
	kids := children(t, h, s.ID)
	t.Logf("cancel_requested %d, subagent.spawned %d, children %d", cancelSeq, spawnSeq, len(kids))
	if len(kids) > 0 {
		waitReports(t, h, s.ID, kids)
	}
	require.Equal(t, 0, len(kids), "a child was made after the cancel was answered (cancel_requested %d, subagent.spawned %d)", cancelSeq, spawnSeq)
}

// spawnThenWait is a parent that spawns one child (which answers "hi"),
// waits for it and answers.
func spawnThenWait(t *testing.T) *lt.AgentSpec {
	t.Helper()
	child := childSpec(script(t, map[string]any{"text": "hi"}))
	return spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "x"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
}

// conflictingChild refuses every sub-agent's creation with a conflict that
// is not its parent's journal moving (a projection row's id taken, as a
// docs upsert refuses it).
type conflictingChild struct {
	store.Store
	n atomic.Int64
}

func (s *conflictingChild) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	if p.Session.ParentID != "" {
		s.n.Add(1)
		return nil, fmt.Errorf("upsert turn x: %w: the id belongs to another session", store.ErrConflict)
	}
	return s.Store.SessionCreate(ctx, p)
}

// TestSpawnRefusedForAnotherConflictEnds: a child's creation refused by a
// conflict other than its parent's journal moving (store.ErrParentMoved)
// is an error of the run, which ends: the runner does not read the
// journal in and try again without end, as it does when the parent moved.
func TestSpawnRefusedForAnotherConflictEnds(t *testing.T) {
	var hook *conflictingChild
	h := newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
		hook = &conflictingChild{Store: h.store}
		return hook
	}, func(*engine.Config) {})
	s := create(t, h, spawnThenWait(t), nil)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopInternal, *s.StopReason)
	require.Less(t, hook.n.Load(), int64(5), "tried a few times, not without end")
	require.Empty(t, children(t, h, s.ID))
}
