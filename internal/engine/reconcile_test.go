package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// chargeTool is an irreversible tool with a reconcile probe. Its first run
// blocks until its context ends, as a call whose worker dies mid-flight;
// later runs succeed at once.
type chargeTool struct {
	probe func(call *tool.Call) (*tool.Reconciliation, error)

	mu      sync.Mutex
	runKeys []string // the idempotency key of every run
	probes  []*tool.Call
	started chan struct{} // closed when the first run starts
}

func newChargeTool(probe func(call *tool.Call) (*tool.Reconciliation, error)) *chargeTool {
	return &chargeTool{probe: probe, started: make(chan struct{})}
}

func (t *chargeTool) Name() string           { return "charge" }
func (t *chargeTool) Description() string    { return "Charge the customer's card." }
func (t *chargeTool) Effect() lt.EffectClass { return lt.EffectIrreversible }
func (t *chargeTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`)
}

func (t *chargeTool) Run(ctx context.Context, call *tool.Call) (*tool.Result, error) {
	t.mu.Lock()
	t.runKeys = append(t.runKeys, call.IdempotencyKey)
	first := len(t.runKeys) == 1
	t.mu.Unlock()
	if first {
		close(t.started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &tool.Result{Output: map[string]string{"charge": "ch_run"}}, nil
}

func (t *chargeTool) Reconcile(ctx context.Context, call *tool.Call) (*tool.Reconciliation, error) {
	t.mu.Lock()
	t.probes = append(t.probes, call)
	t.mu.Unlock()
	return t.probe(call)
}

func (t *chargeTool) seen() (runKeys []string, probes []*tool.Call) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.runKeys...), append([]*tool.Call(nil), t.probes...)
}

// crashDuringCharge starts a session that calls charge once, kills the
// engine while the charge runs and starts it again: the call's outcome is
// unknown to the journal.
func crashDuringCharge(t *testing.T, h *harness, ct *chargeTool) string {
	t.Helper()
	ctx := context.Background()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"tool_calls":[{"name":"charge","arguments":{"amount":5}}]},{"text":"charged"}]`, lt.ToolSpec{Name: "charge"}),
		Input:     "charge the customer",
	})
	require.NoError(t, err)
	select {
	case <-ct.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the charge never ran")
	}
	hard, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, h.eng.Stop(hard))
	h.start("node-a")
	return s.ID
}

func toolEnds(t *testing.T, h *harness, id string) (completed []lt.ToolCompletedData, failed []lt.ToolFailedData) {
	t.Helper()
	evs, err := h.eng.ListEvents(context.Background(), id, 0, 1000)
	require.NoError(t, err)
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventToolCompleted:
			var d lt.ToolCompletedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			completed = append(completed, d)
		case lt.EventToolFailed:
			var d lt.ToolFailedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			failed = append(failed, d)
		case lt.EventActionRequired, lt.EventEffectInDoubt:
			t.Fatalf("the probe answered, yet the journal has %s", ev.Type)
		}
	}
	return completed, failed
}

func TestReconcileProbeSaysItHappened(t *testing.T) {
	ct := newChargeTool(func(call *tool.Call) (*tool.Reconciliation, error) {
		return &tool.Reconciliation{Happened: true, Output: map[string]string{"charge": "ch_found"}}, nil
	})
	h := newHarness(t, ct)
	id := crashDuringCharge(t, h, ct)

	s := h.waitStatus(id, lt.SessionIdle)
	require.Empty(t, s.RequiredActions)
	runKeys, probes := ct.seen()
	require.Len(t, runKeys, 1, "an effect the probe found is never run again")
	require.Len(t, probes, 1)
	require.Equal(t, runKeys[0], probes[0].IdempotencyKey, "the probe looks the effect up by the lost attempt's key")
	require.Equal(t, id, probes[0].SessionID)
	require.NotEmpty(t, probes[0].Workspace)
	require.JSONEq(t, `{"amount":5}`, string(probes[0].Arguments))

	completed, failed := toolEnds(t, h, id)
	require.Empty(t, failed)
	require.Len(t, completed, 1)
	require.Equal(t, lt.ResolutionReconciled, completed[0].Resolution)
	require.JSONEq(t, `{"charge":"ch_found"}`, string(completed[0].Output))

	effects, err := h.eng.ListEffects(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, lt.EffectResolved, effects[0].Status)
	require.Equal(t, lt.ResolutionReconciled, effects[0].Resolution)
	require.Equal(t, runKeys[0], effects[0].IdempotencyKey)
	checkJournal(t, h.store, id)
}

func TestReconcileProbeSaysItDidNotHappen(t *testing.T) {
	ct := newChargeTool(func(call *tool.Call) (*tool.Reconciliation, error) {
		return &tool.Reconciliation{Happened: false}, nil
	})
	h := newHarness(t, ct)
	id := crashDuringCharge(t, h, ct)

	s := h.waitStatus(id, lt.SessionIdle)
	require.Empty(t, s.RequiredActions)
	runKeys, probes := ct.seen()
	require.Len(t, probes, 1)
	require.Len(t, runKeys, 2, "a call the probe says did not happen runs again")
	require.Equal(t, runKeys[0], runKeys[1], "with the same idempotency key")

	completed, failed := toolEnds(t, h, id)
	require.Len(t, failed, 1, "the lost attempt's verdict is journaled")
	require.True(t, failed[0].Retry)
	require.Equal(t, 1, failed[0].Attempt)
	require.Contains(t, failed[0].Error, "did not take effect")
	require.Len(t, completed, 1)
	require.Empty(t, completed[0].Resolution, "the second run's own outcome")
	require.JSONEq(t, `{"charge":"ch_run"}`, string(completed[0].Output))

	effects, err := h.eng.ListEffects(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, effects, 1, "one effect: the same ledger row ran twice")
	require.Equal(t, lt.EffectSucceeded, effects[0].Status)
	require.Equal(t, 2, effects[0].Attempts)
	checkJournal(t, h.store, id)
}

func TestReconcileProbeErrorRaisesInDoubt(t *testing.T) {
	ct := newChargeTool(func(call *tool.Call) (*tool.Reconciliation, error) {
		return nil, errors.New("payments API unreachable")
	})
	h := newHarness(t, ct)
	id := crashDuringCharge(t, h, ct)

	s := h.waitStatus(id, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Equal(t, "charge", act.Tool)
	require.Contains(t, act.Evidence, "the tool's reconcile probe could not tell: payments API unreachable")

	_, err := h.eng.DecideAction(context.Background(), id, act.ID, &lt.Decision{Decision: lt.DecisionHappened, Output: json.RawMessage(`{"charge":"ch_person"}`)})
	require.NoError(t, err)
	h.waitStatus(id, lt.SessionIdle)
	runKeys, probes := ct.seen()
	require.Len(t, runKeys, 1)
	require.Len(t, probes, 1, "a decision settles it: the probe is not asked again")
	effects, err := h.eng.ListEffects(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, lt.DecisionHappened, effects[0].Resolution)
	checkJournal(t, h.store, id)
}

func TestReconcileProbeWithoutAnswerRaisesInDoubt(t *testing.T) {
	ct := newChargeTool(func(call *tool.Call) (*tool.Reconciliation, error) { return nil, nil })
	h := newHarness(t, ct)
	id := crashDuringCharge(t, h, ct)

	s := h.waitStatus(id, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	require.Equal(t, lt.ActionInDoubt, s.RequiredActions[0].Type)
	require.Contains(t, s.RequiredActions[0].Evidence, "the tool's reconcile probe could not tell: the reconcile probe returned no answer")
}

// freeChargeTool is chargeTool saying it never touches the workspace.
type freeChargeTool struct{ *chargeTool }

func (freeChargeTool) WorkspaceFree() bool { return true }

// TestReconcileProbeOfAWorkspaceFreeTool: the probe of a tool that never
// touches the workspace gets no path, as its runs get none.
func TestReconcileProbeOfAWorkspaceFreeTool(t *testing.T) {
	ct := newChargeTool(func(call *tool.Call) (*tool.Reconciliation, error) {
		return &tool.Reconciliation{Happened: true, Output: map[string]string{"charge": "ch_found"}}, nil
	})
	h := newHarness(t, freeChargeTool{ct})
	id := crashDuringCharge(t, h, ct)
	h.waitStatus(id, lt.SessionIdle)
	_, probes := ct.seen()
	require.Len(t, probes, 1)
	require.Empty(t, probes[0].Workspace)
	checkJournal(t, h.store, id)
}
