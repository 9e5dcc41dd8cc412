package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A workspace lost again and again although every restore of it is held
// (checkpoint.go, restorebound.go): the losses are bounded within a
// window of steps, a loss now and then is restored for ever.

// forgettingBackend opens the real local environments; once armed, their
// Holds answers the truth only right after a restore (so the restore's
// check passes), and "not held" at the next question: a hostile runner
// that makes the session lose and restore its workspace at every call.
type forgettingBackend struct {
	environment.Backend
	armed    atomic.Bool
	restores atomic.Int32
}

func (b *forgettingBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	env, err := b.Backend.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &forgettingEnv{Environment: env, b: b}, nil
}

type forgettingEnv struct {
	environment.Environment
	b     *forgettingBackend
	fresh atomic.Bool // restored since the last Holds
}

func (e *forgettingEnv) Restore(ctx context.Context, id string) (snapshot.Stats, error) {
	stats, err := e.Environment.Restore(ctx, id)
	if err == nil {
		e.b.restores.Add(1)
		e.fresh.Store(true)
	}
	return stats, err
}

func (e *forgettingEnv) Holds(ctx context.Context, id string) (bool, error) {
	if e.b.armed.Load() && !e.fresh.Swap(false) {
		return false, nil
	}
	return e.Environment.Holds(ctx, id)
}

// onModelCall calls f with the number of each model call, once answered.
type onModelCall struct {
	model.Provider
	calls atomic.Int32
	f     func(n int)
}

func (p *onModelCall) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	resp, err := p.Provider.Respond(ctx, req)
	p.f(int(p.calls.Add(1)))
	return resp, err
}

// writesScript is n steps that each write a file, then the answer.
func writesScript(n int) string {
	steps := make([]string, 0, n+1)
	for i := 1; i <= n; i++ {
		steps = append(steps, fmt.Sprintf(`{"tool_calls":[{"name":"write_file","arguments":{"path":"f%d.md","content":"step %d"}}]}`, i, i))
	}
	steps = append(steps, `{"text":"all written"}`)
	return "[" + strings.Join(steps, ",") + "]"
}

func newBoundHarness(t *testing.T, p model.Provider, b environment.Backend, set func(environment.Backend)) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)},
		providers: map[string]model.Provider{"scripted": p}}
	h.store = openStore(t, h.dir)
	t.Cleanup(func() { h.store.Close() })
	h.wrapEnvironments = func(local environment.Backend) environment.Backend {
		set(local)
		return b
	}
	h.start("node-a")
	return h
}

// TestWorkspaceLostAtEveryCallIsBounded: an environment that holds the
// snapshot right after each restore but not at the next call used to make
// the session lose and restore its workspace for ever (each restore is
// held, so the count of restores in a row started over every time). Now
// the turn fails with sandbox_error after maxLossesPerWindow losses,
// saying where the workspace keeps being lost, and nothing is restored
// past that.
func TestWorkspaceLostAtEveryCallIsBounded(t *testing.T) {
	b := &forgettingBackend{}
	p := &onModelCall{Provider: scripted.New(nil), f: func(n int) {
		if n == 2 { // after the first step's checkpoint snapshotted a.md
			b.armed.Store(true)
		}
	}}
	h := newBoundHarness(t, p, b, func(local environment.Backend) { b.Backend = local })
	s := create(t, h, spec(t, writesScript(10), lt.ToolSpec{Name: "write_file"}), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)

	lost := events(t, h, s.ID, lt.EventEnvironmentLost)
	require.Len(t, lost, 4, "maxLossesPerWindow losses, each restored, then no more")
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentRestored), 4)
	require.EqualValues(t, 4, b.restores.Load(), "no restore past the bound")
	failed := events(t, h, s.ID, lt.EventTurnFailed)
	require.Len(t, failed, 1)
	d := data[lt.TurnFailedData](t, failed[0])
	require.Equal(t, lt.StopSandboxError, d.StopReason)
	require.Contains(t, d.Error, "keeps being lost on this node: 4 losses within 20 steps")
	require.Empty(t, events(t, h, s.ID, lt.EventTurnCompleted))
	checkJournal(t, h.store, s.ID)

	// Counted from the journal: a new turn tries again (and meets the
	// same bound), the old turn's losses not held against it.
	_, err := h.eng.CreateTurn(context.Background(), s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	waitEvents(t, h, s.ID, lt.EventTurnFailed, 2)
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentLost), 8)
}

// TestWorkspaceLostNowAndThenIsAlwaysRestored: an environment that loses
// the workspace once every five steps (one "not held" answer at a time, a
// runner that crashes now and then) has it restored every time, though
// the turn loses it more often in all than the window allows.
func TestWorkspaceLostNowAndThenIsAlwaysRestored(t *testing.T) {
	unheld := &unheldBackend{}
	unheld.armed.Store(true)
	crashAt := map[int]bool{3: true, 8: true, 13: true, 18: true, 23: true}
	p := &onModelCall{Provider: scripted.New(nil), f: func(n int) {
		if crashAt[n] {
			unheld.mu.Lock()
			unheld.left = 1
			unheld.mu.Unlock()
		}
	}}
	h := newBoundHarness(t, p, unheld, func(local environment.Backend) { unheld.Backend = local })
	s := create(t, h, spec(t, writesScript(25), lt.ToolSpec{Name: "write_file"}), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)

	turns, err := h.eng.ListTurns(context.Background(), s.ID)
	require.NoError(t, err)
	require.Len(t, turns, 1)
	require.Equal(t, lt.TurnCompleted, turns[0].Status, "%s", turns[0].Error)
	require.Equal(t, "all written", turns[0].Output)
	lost := events(t, h, s.ID, lt.EventEnvironmentLost)
	require.Len(t, lost, 5, "more losses in the turn than the window allows, but never that many within it")
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentRestored), 5)
	var steps []int
	for _, ev := range lost {
		steps = append(steps, ev.Step)
	}
	require.Equal(t, []int{3, 8, 13, 18, 23}, steps)
	checkJournal(t, h.store, s.ID)
}

// TestRecreateAfterAnIdleStopIsChecked: an environment recreated after an
// idle stop that does not hold the snapshot it was just restored from is
// not taken at its word (it used to be journaled environment.restored and
// used): each recreate is checked as the restore of a lost workspace is,
// counted as a loss when not held, and bounded the same way: the turn
// fails with sandbox_error, and nothing ran in the workspace since.
func TestRecreateAfterAnIdleStopIsChecked(t *testing.T) {
	unheld := &unheldBackend{left: -1}
	h := newWrappedHarness(t, func(b environment.Backend) environment.Backend {
		unheld.Backend = b
		return unheld
	})
	ctx := context.Background()
	s := create(t, h, idleSpec(t, 60, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo kept > a.txt"}}]},
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"cat a.txt"}}]},
	  {"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}), nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	h.clock.Advance(61 * time.Second)
	stopped := stoppedEvent(t, h, s.ID)
	require.NotEmpty(t, stopped.Snapshot)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)

	unheld.armed.Store(true)
	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`{"answer":42}`)})
	require.NoError(t, err)
	failed := waitEvents(t, h, s.ID, lt.EventTurnFailed, 1)
	d := data[lt.TurnFailedData](t, failed[0])
	require.Equal(t, lt.StopSandboxError, d.StopReason)
	require.Contains(t, d.Error, "could not be brought back on this node")

	var after []lt.Event
	all := events(t, h, s.ID)
	for i, ev := range all {
		if ev.Type == lt.EventEnvironmentStopped {
			after = all[i+1:]
		}
	}
	var lost int
	for _, ev := range after {
		switch ev.Type {
		case lt.EventEnvironmentRestored:
			t.Fatalf("environment.restored (seq %d) from a recreate the environment does not hold", ev.Seq)
		case lt.EventToolStarted:
			t.Fatalf("tool.started (seq %d) in a workspace never brought back", ev.Seq)
		case lt.EventEnvironmentLost:
			lost++
			require.Contains(t, data[lt.EnvironmentLostData](t, ev).Reason, "recreated from")
		}
	}
	require.Equal(t, 3, lost, "maxRestoreAttempts recreates, each counted as a loss, then no more")
	checkJournal(t, h.store, s.ID)
}
