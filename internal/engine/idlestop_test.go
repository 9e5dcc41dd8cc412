package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// newWrappedHarness is a harness whose sessions run their programs in the
// local environment backend (as a server's do), wrapped by wrap, on a fake
// clock.
func newWrappedHarness(t *testing.T, wrap func(environment.Backend) environment.Backend) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	h.wrapEnvironments = wrap
	h.start("node-a")
	return h
}

// newIdleStopHarness is newWrappedHarness with the local backend as is.
func newIdleStopHarness(t *testing.T) *harness {
	return newWrappedHarness(t, func(b environment.Backend) environment.Backend { return b })
}

// idleSpec is spec with environment.idle_stop_seconds.
func idleSpec(t *testing.T, seconds int, script string, tools ...lt.ToolSpec) *lt.AgentSpec {
	s := spec(t, script, tools...)
	s.Environment = &lt.Environment{IdleStopSeconds: seconds}
	return s
}

// stoppedEvent waits for the session's environment.stopped.
func stoppedEvent(t *testing.T, h *harness, id string) lt.EnvironmentStoppedData {
	t.Helper()
	waitEvent(t, h, id, lt.EventEnvironmentStopped)
	return data[lt.EnvironmentStoppedData](t, events(t, h, id, lt.EventEnvironmentStopped)[0])
}

// writeThenWait is the script of a session whose first step writes text
// to file and waits for a function result (lookup) in the same step, so
// that it parks before the step's checkpoint; its next step reads the
// file back.
func writeThenWait(text, file string) string {
	return `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo ` + text + ` > ` + file + `"}},{"name":"lookup","arguments":{}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"cat ` + file + `"}}]},
	  {"text":"done"}]`
}

// lastToolOutput is the output of the session's last completed call.
func lastToolOutput(t *testing.T, h *harness, id string) string {
	t.Helper()
	done := events(t, h, id, lt.EventToolCompleted)
	require.NotEmpty(t, done)
	return string(data[lt.ToolCompletedData](t, done[len(done)-1]).Output)
}

// TestIdleStopAndRecreate: a session parked on a required action longer
// than idle_stop_seconds has its environment stopped (the workspace
// directory freed, environment.stopped at the snapshot it held); the
// decision resumes it, the environment is provisioned and restored before
// the next call, which finds the workspace as the session left it, and
// the model is told nothing.
func TestIdleStopAndRecreate(t *testing.T) {
	h := newIdleStopHarness(t)
	ctx := context.Background()
	s := create(t, h, idleSpec(t, 60, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo kept > a.txt"}}]},
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"cat a.txt"}}]},
	  {"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}), nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.FileExists(t, filepath.Join(ws, "a.txt"))

	h.clock.Advance(59 * time.Second)
	h.clock.Advance(2 * time.Second)
	stopped := stoppedEvent(t, h, s.ID)
	require.Equal(t, "idle", stopped.Reason)
	var last lt.CheckpointCreatedData
	for _, ev := range events(t, h, s.ID, lt.EventCheckpointCreated) {
		last = data[lt.CheckpointCreatedData](t, ev)
	}
	require.NotEmpty(t, last.Checkpoint.Snapshot)
	require.Equal(t, last.Checkpoint.Snapshot, stopped.Snapshot, "nothing was written since the step's checkpoint")
	require.NoDirExists(t, ws, "the environment is freed")
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1, "still waiting for its decision")

	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`{"answer":42}`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)

	var order []string
	for _, ev := range events(t, h, s.ID, lt.EventEnvironmentStopped, lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored, lt.EventEnvironmentLost, lt.EventToolStarted) {
		order = append(order, ev.Type)
	}
	require.Equal(t, []string{lt.EventToolStarted, lt.EventToolStarted, lt.EventEnvironmentStopped, lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored, lt.EventToolStarted}, order)
	restored := data[lt.EnvironmentRestoredData](t, events(t, h, s.ID, lt.EventEnvironmentRestored)[0])
	require.Equal(t, stopped.Snapshot, restored.Snapshot)
	require.Equal(t, last.Checkpoint.ID, restored.CheckpointID)
	require.Empty(t, restored.Note, "nothing was lost: the model is told nothing")
	require.Empty(t, restored.Missing)
	done := events(t, h, s.ID, lt.EventToolCompleted)
	require.Contains(t, string(data[lt.ToolCompletedData](t, done[len(done)-1]).Output), "kept", "the workspace is as the session left it")
	require.FileExists(t, filepath.Join(ws, "a.txt"))
	checkJournal(t, h.store, s.ID)
}

// TestIdleStopKeepsWhatTheStepWroteSinceItsCheckpoint: a session parked
// mid-step (a call of the step wrote a file, the next waits for its
// result) is stopped at a snapshot that holds the write, and recreated
// with it, though the step's checkpoint is not taken yet.
func TestIdleStopKeepsWhatTheStepWroteSinceItsCheckpoint(t *testing.T) {
	h := newIdleStopHarness(t)
	ctx := context.Background()
	s := create(t, h, idleSpec(t, 30, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo mid > mid.txt"}},{"name":"lookup","arguments":{}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"cat mid.txt"}}]},
	  {"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}), nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Empty(t, events(t, h, s.ID, lt.EventCheckpointCreated), "parked before the step's checkpoint")

	h.clock.Advance(31 * time.Second)
	stopped := stoppedEvent(t, h, s.ID)
	require.NotEmpty(t, stopped.Snapshot)
	require.NoDirExists(t, filepath.Join(h.dir, "workspaces", s.ID))

	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost))
	restored := data[lt.EnvironmentRestoredData](t, events(t, h, s.ID, lt.EventEnvironmentRestored)[0])
	require.Equal(t, stopped.Snapshot, restored.Snapshot)
	require.Empty(t, restored.Note)
	require.Empty(t, restored.Replayed, "nothing ran again")
	done := events(t, h, s.ID, lt.EventToolCompleted)
	require.Contains(t, string(data[lt.ToolCompletedData](t, done[len(done)-1]).Output), "mid")
	var shells []int
	for _, ev := range events(t, h, s.ID, lt.EventToolStarted) {
		if d := data[lt.ToolStartedData](t, ev); d.Tool == "shell" {
			shells = append(shells, d.Step)
		}
	}
	require.Equal(t, []int{1, 2}, shells, "the first shell call ran once, and was not run again")
	checkJournal(t, h.store, s.ID)
}

// TestIdleStopNeverStopsARunningSession: while one session is parked and
// another runs a command past the idle time, only the parked one is
// stopped (the same claim pass saw both); the running one keeps its
// environment, and is stopped only once it has been idle that long.
func TestIdleStopNeverStopsARunningSession(t *testing.T) {
	h := newIdleStopHarness(t)
	gate := filepath.Join(h.dir, "gate")
	parked := create(t, h, idleSpec(t, 10, `[{"tool_calls":[{"name":"lookup","arguments":{}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "lookup", Type: "function"}), nil)
	h.waitStatus(parked.ID, lt.SessionRequiresAction)
	running := create(t, h, idleSpec(t, 10, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo here > here.txt; while [ ! -e '`+gate+`' ]; do sleep 0.01; done"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	ws := filepath.Join(h.dir, "workspaces", running.ID)
	waitFile(t, filepath.Join(ws, "here.txt"))

	h.clock.Advance(11 * time.Second)
	waitEvent(t, h, parked.ID, lt.EventEnvironmentStopped)
	require.Empty(t, events(t, h, running.ID, lt.EventEnvironmentStopped, lt.EventEnvironmentStopFailed))
	require.DirExists(t, ws)

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	h.waitStatus(running.ID, lt.SessionIdle)
	require.Empty(t, events(t, h, running.ID, lt.EventEnvironmentStopped))
	require.DirExists(t, ws)
	h.clock.Advance(11 * time.Second)
	waitEvent(t, h, running.ID, lt.EventEnvironmentStopped)
	require.NoDirExists(t, ws, "an idle session's environment is stopped too")
	checkJournal(t, h.store, running.ID)
	checkJournal(t, h.store, parked.ID)
}

// TestIdleStopSecondsValidated: a bad idle_stop_seconds is refused,
// naming the field.
func TestIdleStopSecondsValidated(t *testing.T) {
	h := newHarness(t)
	for _, n := range []int{-1, 31 * 24 * 3600} {
		_, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{AgentSpec: idleSpec(t, n, `[{"text":"hi"}]`), Input: "go"})
		require.ErrorContains(t, err, "agent_spec.environment.idle_stop_seconds")
	}
}

// refusingBackend opens the real local environments; their Stop is
// refused (environment.ErrBusy) while refuse is set, as a runner's is
// while a call of it is in flight.
type refusingBackend struct {
	environment.Backend
	refuse atomic.Bool
}

func (b *refusingBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	env, err := b.Backend.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &refusingEnv{Environment: env, b: b}, nil
}

type refusingEnv struct {
	environment.Environment
	b *refusingBackend
}

func (e *refusingEnv) Stop(ctx context.Context, id string) error {
	if e.b.refuse.Load() {
		return fmt.Errorf("stop at /a/host/path: %w", environment.ErrBusy)
	}
	return e.Environment.Stop(ctx, id)
}

// TestIdleStopRefusedIsTriedAgainLater: a refused idle stop journals
// environment.stop_failed (saying why, without the backend's text), keeps
// the environment, and moves the session's wake time on (twice the idle
// time after one refusal), so it is not claimed again and again; then the
// stop is tried again.
func TestIdleStopRefusedIsTriedAgainLater(t *testing.T) {
	refusing := &refusingBackend{}
	refusing.refuse.Store(true)
	h := newWrappedHarness(t, func(b environment.Backend) environment.Backend {
		refusing.Backend = b
		return refusing
	})
	s := create(t, h, idleSpec(t, 20, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo x > x.txt"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	ws := filepath.Join(h.dir, "workspaces", s.ID)

	h.clock.Advance(21 * time.Second)
	waitEvent(t, h, s.ID, lt.EventEnvironmentStopFailed)
	failed := events(t, h, s.ID, lt.EventEnvironmentStopFailed)[0]
	d := data[lt.EnvironmentStopFailedData](t, failed)
	require.Equal(t, "idle", d.Reason)
	require.Contains(t, d.Error, "busy")
	require.NotContains(t, d.Error, "/a/host/path", "the backend's text stays in the log")
	require.FileExists(t, filepath.Join(ws, "x.txt"))
	row, err := h.store.SessionGet(context.Background(), s.ID)
	require.NoError(t, err)
	require.NotNil(t, row.WakeAt)
	require.True(t, row.WakeAt.Equal(failed.Time.Add(40*time.Second)), "tried again later (twice the idle time after one refusal), not at every poll: wake at %v", row.WakeAt)

	refusing.refuse.Store(false)
	h.clock.Advance(41 * time.Second)
	stoppedEvent(t, h, s.ID)
	require.NoDirExists(t, ws)
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentStopFailed), 1)
	checkJournal(t, h.store, s.ID)
}

// TestIdleStopTellsTheModelNothing: after an idle stop and recreate, the
// model's next request holds the file it reads back and no note about the
// workspace (where a lost workspace's restore tells it what happened).
func TestIdleStopTellsTheModelNothing(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("write_file", `{"path":"notes/a.md","content":"alpha"}`),
		call("lookup", `{}`),
		call("read_file", `{"path":"notes/a.md"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Environment: &lt.Environment{IdleStopSeconds: 60}, Tools: []lt.ToolSpec{
		{Name: "write_file"}, {Name: "read_file"}, {Name: "lookup", Type: "function"},
	}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	h.clock.Advance(61 * time.Second)
	stoppedEvent(t, h, s.ID)
	require.NoDirExists(t, filepath.Join(h.dir, "workspaces", s.ID))

	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentRestored), 1)
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost))
	steps := p.stepRequests()
	last := steps[len(steps)-1].msgs
	require.Contains(t, last[len(last)-1].Text, "alpha", "the file is back")
	for _, m := range last {
		require.NotContains(t, m.Text, "restored", "the model is told nothing")
		require.NotContains(t, m.Text, "recreated")
	}
	checkJournal(t, h.store, s.ID)
}

// stopReplyLost parks a session on box1 before its step's checkpoint (the
// step wrote mid.txt) and lets its idle stop's reply be lost after the
// runner removed the workspace (environment.stop_failed, box1
// disconnected). It returns the session, its workspace on the runner and
// the stop's journaled snapshot.
func stopReplyLost(t *testing.T, h *harness, rb *runnerBackend) (*lt.Session, string, lt.EnvironmentStoppingData) {
	t.Helper()
	rb.connected.Store(true)
	rb.loseStopReply.Store(true)
	sp := onGPU(spec(t, writeThenWait("mid", "mid.txt"),
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	sp.Environment.IdleStopSeconds = 30
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Empty(t, events(t, h, s.ID, lt.EventCheckpointCreated), "parked before the step's checkpoint")
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.FileExists(t, filepath.Join(ws, "mid.txt"))

	h.clock.Advance(31 * time.Second)
	waitEvent(t, h, s.ID, lt.EventEnvironmentStopFailed)
	require.NoDirExists(t, ws, "the runner stopped it; only its reply was lost")
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentStopped))
	stopping := events(t, h, s.ID, lt.EventEnvironmentStopping)
	require.Len(t, stopping, 1)
	snap := data[lt.EnvironmentStoppingData](t, stopping[0])
	require.NotEmpty(t, snap.Snapshot)
	require.Equal(t, "box1", snap.Runner)
	return s, ws, snap
}

// TestIdleStopReplyLostKeepsTheStopsSnapshot: the runner stops the
// environment (its workspace removed) at the snapshot the idle stop took,
// and its connection breaks before the reply. The snapshot was journaled
// before the stop (environment.stopping), so the copy made anew when the
// session goes on is restored from it, with what the step wrote since its
// checkpoint, and the model is told nothing.
func TestIdleStopReplyLostKeepsTheStopsSnapshot(t *testing.T) {
	h, rb := newRunnerHarness(t)
	ctx := context.Background()
	s, _, snap := stopReplyLost(t, h, rb)

	rb.connected.Store(true)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	restored := events(t, h, s.ID, lt.EventEnvironmentRestored)
	require.Len(t, restored, 1)
	d := data[lt.EnvironmentRestoredData](t, restored[0])
	require.Equal(t, snap.Snapshot, d.Snapshot, "restored from the stop's snapshot, not the last checkpoint's")
	require.Empty(t, d.Note, "nothing was lost: the model is told nothing")
	require.Empty(t, d.Missing)
	require.Contains(t, lastToolOutput(t, h, s.ID), "mid", "what the step wrote since its checkpoint is kept")
	checkJournal(t, h.store, s.ID)
}

// TestIdleStopReplyLostThenAnEmptyCopyKeepsTheStopsSnapshot: as above, but
// before the stop is tried again an empty workspace exists on the runner
// again (the runner restarted, or something opened it), so the next idle
// stop's open finds it there and not made anew. That copy is not the
// journal's: the stop keeps the snapshot the earlier stop journaled, and
// the recreate restores what the step wrote since its checkpoint.
func TestIdleStopReplyLostThenAnEmptyCopyKeepsTheStopsSnapshot(t *testing.T) {
	h, rb := newRunnerHarness(t)
	ctx := context.Background()
	s, ws, snap := stopReplyLost(t, h, rb)

	require.NoError(t, os.MkdirAll(ws, 0o755), "an empty workspace on the runner again")
	rb.connected.Store(true)
	h.clock.Advance(61 * time.Second)
	stopped := stoppedEvent(t, h, s.ID)
	require.Equal(t, snap.Snapshot, stopped.Snapshot, "the earlier stop's snapshot is kept: the empty copy is not the journal's")

	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Contains(t, lastToolOutput(t, h, s.ID), "mid", "what the step wrote since its checkpoint is kept")
	checkJournal(t, h.store, s.ID)
}

// TestIdleStopOfAPausedSession: a session a person paused is parked like
// one that waits: its environment is stopped once it has been paused for
// idle_stop_seconds. A decision made while paused runs nothing; the resume
// does, and its first step recreates the environment and restores it
// (journaled) before the next call, which finds the workspace as the
// session left it.
func TestIdleStopOfAPausedSession(t *testing.T) {
	h := newIdleStopHarness(t)
	ctx := context.Background()
	s := create(t, h, idleSpec(t, 60, writeThenWait("kept", "a.txt"),
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}), nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.FileExists(t, filepath.Join(ws, "a.txt"))
	_, err := h.eng.PauseSession(ctx, s.ID, &lt.PauseRequest{Reason: "lunch"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionPaused)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)

	h.clock.Advance(61 * time.Second)
	stopped := stoppedEvent(t, h, s.ID)
	require.NotEmpty(t, stopped.Snapshot)
	require.NoDirExists(t, ws, "the paused session's environment is freed")
	require.Equal(t, lt.SessionPaused, h.waitStatus(s.ID, lt.SessionPaused).Status, "still paused")
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentProvisioned), "nothing recreated while paused")

	_, err = h.eng.ResumeSession(ctx, s.ID, &lt.ResumeRequest{})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	var order []string
	for _, ev := range events(t, h, s.ID, lt.EventSessionPaused, lt.EventSessionResumed, lt.EventEnvironmentStopped, lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored, lt.EventEnvironmentLost, lt.EventToolStarted) {
		order = append(order, ev.Type)
	}
	require.Equal(t, []string{lt.EventToolStarted, lt.EventToolStarted, lt.EventSessionPaused, lt.EventEnvironmentStopped, lt.EventSessionResumed,
		lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored, lt.EventToolStarted}, order)
	restored := data[lt.EnvironmentRestoredData](t, events(t, h, s.ID, lt.EventEnvironmentRestored)[0])
	require.Equal(t, stopped.Snapshot, restored.Snapshot)
	require.Empty(t, restored.Note, "nothing was lost: the model is told nothing")
	require.Contains(t, lastToolOutput(t, h, s.ID), "kept", "the workspace is as the session left it")
	checkJournal(t, h.store, s.ID)
}

// TestIdleStopOnAFullRunner: a parked session holds no slot of its
// runner, and its idle stop needs none: with the runner at its capacity
// the stop still opens the environment (to stop it: ForStop) and stops
// it, where it was refused as "at its capacity" before.
func TestIdleStopOnAFullRunner(t *testing.T) {
	h, rb := newRunnerHarness(t)
	rb.connected.Store(true)
	sp := onGPU(spec(t, writeThenWait("kept", "a.txt"),
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	sp.Environment.IdleStopSeconds = 30
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.FileExists(t, filepath.Join(ws, "a.txt"))

	rb.full.Store(true) // other sessions took every slot meanwhile
	h.clock.Advance(31 * time.Second)
	stopped := stoppedEvent(t, h, s.ID)
	require.NotEmpty(t, stopped.Snapshot)
	require.Equal(t, "box1", stopped.Runner)
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentStopFailed), "not refused for want of a slot")
	require.NoDirExists(t, ws)
	checkJournal(t, h.store, s.ID)
}

// TestIdleStopWaitsForAPersonsRead: a person's listing of a runner
// session's files holds its environment open on the runner while it
// lasts, so an idle stop that comes meanwhile finds the environment busy.
// The stop waits for the listing to end and stops then: no
// environment.stop_failed is journaled, and the stop is not put off by
// the idle time.
func TestIdleStopWaitsForAPersonsRead(t *testing.T) {
	h, rb := newRunnerHarness(t)
	rb.connected.Store(true)
	sp := onGPU(spec(t, writeThenWait("mid", "mid.txt"),
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	sp.Environment.IdleStopSeconds = 30
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)

	held := &heldCall{entered: make(chan struct{}), release: make(chan struct{})}
	rb.holdList.Store(held)
	listed := make(chan error, 1)
	go func() {
		_, err := h.eng.ListFiles(context.Background(), s.ID, "")
		listed <- err
	}()
	<-held.entered
	h.clock.Advance(31 * time.Second)
	require.Eventually(t, func() bool { return rb.stops.Load() >= 1 }, 30*time.Second, time.Millisecond,
		"the idle stop tried while the person's listing held the environment open")
	close(held.release)
	require.NoError(t, <-listed)
	stopped := stoppedEvent(t, h, s.ID)
	require.Equal(t, "box1", stopped.Runner)
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentStopFailed), "a person's short read is no refusal")
	checkJournal(t, h.store, s.ID)
}

// TestIdleStopAfterAPersonsReadEndedMeanwhile: the person's listing that
// made the idle stop's first try busy ends before the stop waits for it
// (a loaded machine: the listing's end comes between the refusal and the
// wait). The stop is tried again all the same and stops: nothing holds
// the environment any more, and no refusal is journaled.
func TestIdleStopAfterAPersonsReadEndedMeanwhile(t *testing.T) {
	h, rb := newRunnerHarness(t)
	rb.connected.Store(true)
	sp := onGPU(spec(t, writeThenWait("mid", "mid.txt"),
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	sp.Environment.IdleStopSeconds = 30
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)

	held := &heldCall{entered: make(chan struct{}), release: make(chan struct{})}
	rb.holdList.Store(held)
	listed := make(chan error, 1)
	go func() {
		_, err := h.eng.ListFiles(context.Background(), s.ID, "")
		listed <- err
	}()
	<-held.entered
	listingEnded := make(chan error, 1)
	endListing := func() {
		close(held.release)
		listingEnded <- <-listed
	}
	rb.afterBusyStop.Store(&endListing)
	h.clock.Advance(31 * time.Second)
	stopped := stoppedEvent(t, h, s.ID)
	require.NoError(t, <-listingEnded)
	require.Equal(t, "box1", stopped.Runner)
	require.Equal(t, int32(2), rb.stops.Load(), "refused once while the listing held it, then stopped")
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentStopFailed), "a person's short read is no refusal")
	checkJournal(t, h.store, s.ID)
}
