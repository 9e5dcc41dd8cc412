package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// personThenModelScript: the first step writes x.txt (checkpointed); the
// second waits for a function result (a person changes x.txt then),
// overwrites x.txt and waits again, so that it parks before its
// checkpoint, which would hold the person's change; the third reads
// x.txt back.
const personThenModelScript = `[
  {"tool_calls":[{"name":"shell","arguments":{"command":"echo first > x.txt"}}]},
  {"tool_calls":[{"name":"lookup","arguments":{}},{"name":"shell","arguments":{"command":"echo by-the-model > x.txt"}},{"name":"lookup","arguments":{}}]},
  {"tool_calls":[{"name":"shell","arguments":{"command":"cat x.txt"}}]},
  {"text":"done"}]`

// personThenModelThenStop runs sp (personThenModelScript): a person
// writes x.txt while the session waits, the model then overwrites it and
// the session parks again before a checkpoint; its environment is
// stopped for idleness. It returns the session, parked and stopped.
func personThenModelThenStop(t *testing.T, h *harness, sp *lt.AgentSpec) *lt.Session {
	t.Helper()
	ctx := context.Background()
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	_, err := h.eng.WriteFile(ctx, s.ID, "x.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	waitEvents(t, h, s.ID, lt.EventActionRequired, 2)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)

	h.clock.Advance(time.Duration(sp.Environment.IdleStopSeconds+1) * time.Second)
	stopped := stoppedEvent(t, h, s.ID)
	require.NotEmpty(t, stopped.Snapshot, "stopped at its own snapshot")
	stopping := events(t, h, s.ID, lt.EventEnvironmentStopping)
	require.NotEmpty(t, stopping)
	changed := events(t, h, s.ID, lt.EventWorkspaceChanged)
	require.Len(t, changed, 1)
	require.Equal(t, changed[0].Seq, data[lt.EnvironmentStoppingData](t, stopping[len(stopping)-1]).PersonChangesThrough,
		"the stop's snapshot holds the person's change, applied before it")
	return h.waitStatus(s.ID, lt.SessionRequiresAction)
}

// recreatedAsTheModelLeftIt decides the session's wait; the environment is
// recreated from the stop's snapshot, and the model finds x.txt as it
// left it: the person's change, which the snapshot holds under the
// model's edit, is not applied again. The model is told nothing.
func recreatedAsTheModelLeftIt(t *testing.T, h *harness, s *lt.Session) {
	t.Helper()
	_, err := h.eng.DecideAction(context.Background(), s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`2`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	restored := events(t, h, s.ID, lt.EventEnvironmentRestored)
	require.NotEmpty(t, restored)
	require.Empty(t, data[lt.EnvironmentRestoredData](t, restored[len(restored)-1]).Note, "nothing to tell the model")
	require.Contains(t, lastToolOutput(t, h, s.ID), "by-the-model")
	require.NotContains(t, lastToolOutput(t, h, s.ID), "by-a-person", "the person's change is not applied again over the model's edit")
	checkJournal(t, h.store, s.ID)
}

// TestRecreateAppliesNoPersonChangeTheStopHeld: the server's own copy (the
// local backend). A person writes x.txt, the model then overwrites it and
// the session is stopped for idleness; recreated, x.txt is the model's.
func TestRecreateAppliesNoPersonChangeTheStopHeld(t *testing.T) {
	h := newIdleStopHarness(t)
	sp := idleSpec(t, 60, personThenModelScript, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"})
	s := personThenModelThenStop(t, h, sp)
	recreatedAsTheModelLeftIt(t, h, s)
}

// TestRunnerRecreateAppliesNoPersonChangeTheStopHeld: the same on a
// runner, where the person's write was applied to the runner's workspace
// at once; while stopped, a person's read of x.txt (from the stop's
// snapshot) shows the model's bytes too.
func TestRunnerRecreateAppliesNoPersonChangeTheStopHeld(t *testing.T) {
	h, _ := newFilesRunnerHarness(t)
	sp := onGPU(spec(t, personThenModelScript, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	sp.Environment.IdleStopSeconds = 30
	s := personThenModelThenStop(t, h, sp)

	fe, rc, err := h.eng.OpenFile(context.Background(), s.ID, "x.txt")
	require.NoError(t, err)
	body, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, lt.FilesFromSnapshot, fe.Source, "stopped: read from the stop's snapshot")
	require.Equal(t, "by-the-model\n", string(body))

	recreatedAsTheModelLeftIt(t, h, s)
}
