package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// gate holds the scripted provider's delay_ms until the test lets it go,
// so a model call is in flight for exactly as long as a test needs.
type gate struct {
	entered chan struct{}
	release chan time.Time
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 16), release: make(chan time.Time)}
}

func (g *gate) after(time.Duration) <-chan time.Time {
	g.entered <- struct{}{}
	return g.release
}

// await waits until a call waits at the gate.
func (g *gate) await(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no model call reached the gate")
	}
}

// open lets the call waiting at the gate answer.
func (g *gate) open(t *testing.T) {
	t.Helper()
	select {
	case g.release <- time.Time{}:
	case <-time.After(10 * time.Second):
		t.Fatal("no model call waits at the gate")
	}
}

// newGatedHarness is a harness whose scripted provider's delays wait at g.
func newGatedHarness(t *testing.T, g *gate) *harness {
	return newHarnessWith(t, map[string]model.Provider{"scripted": scripted.New(&scripted.Config{After: g.after})}, nil)
}

func pauseNow(t *testing.T, h *harness, id string) *lt.Session {
	t.Helper()
	s, err := h.eng.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "lunch"})
	require.NoError(t, err)
	return s
}

func resume(t *testing.T, h *harness, id string) *lt.Session {
	t.Helper()
	s, err := h.eng.ResumeSession(context.Background(), id, &lt.ResumeRequest{})
	require.NoError(t, err)
	return s
}

// requireReleased asserts that no worker holds the session and that no
// scheduler will pick it: no lease, not runnable, no wake time.
func requireReleased(t *testing.T, h *harness, id string) {
	t.Helper()
	row, err := h.store.SessionGet(context.Background(), id)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner, "a paused session holds no lease")
	require.False(t, row.Runnable, "a paused session is not runnable")
	require.Nil(t, row.WakeAt, "a paused session has no wake time")
	require.Equal(t, string(lt.SessionPaused), row.Status)
}

// seqOf returns the seq of the first event of that type (0: none).
func seqOf(t *testing.T, h *harness, id, typ string) int64 {
	t.Helper()
	evs := events(t, h, id, typ)
	if len(evs) == 0 {
		return 0
	}
	return evs[0].Seq
}

// TestPauseDuringModelCall: a pause requested while a model call runs does
// not cut it: the answer is journaled, then the session pauses before the
// tool call it asked for starts, holding no worker; resumed, the turn goes
// on to its end.
func TestPauseDuringModelCall(t *testing.T) {
	g := newGate()
	h := newGatedHarness(t, g)
	s := create(t, h, spec(t, `[{"delay_ms":1000,"tool_calls":[{"name":"shell","arguments":{"command":"echo ran"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)
	g.await(t)
	p := pauseNow(t, h, s.ID)
	require.True(t, p.PauseRequested, "pending until the call in flight has finished")
	require.Equal(t, lt.SessionRunning, p.Status)
	got, err := h.eng.GetSession(context.Background(), s.ID)
	require.NoError(t, err)
	require.True(t, got.PauseRequested)

	g.open(t)
	s = h.waitStatus(s.ID, lt.SessionPaused)
	require.False(t, s.PauseRequested, "the pause has taken effect")
	requireReleased(t, h, s.ID)
	require.Len(t, events(t, h, s.ID, lt.EventModelResponded), 1, "the call in flight finished")
	require.Empty(t, events(t, h, s.ID, lt.EventModelFailed), "a pause cuts nothing")
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted), "no call starts once paused")
	paused := events(t, h, s.ID, lt.EventSessionPaused)
	require.Len(t, paused, 1)
	require.Equal(t, "lunch", data[lt.SessionPausedData](t, paused[0]).Reason)
	require.Less(t, seqOf(t, h, s.ID, lt.EventModelResponded), paused[0].Seq)

	s = resume(t, h, s.ID)
	require.Equal(t, lt.SessionRunning, s.Status, "the turn had started")
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "done", mustTurnOutput(t, h, s))
	require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1)
	require.Less(t, seqOf(t, h, s.ID, lt.EventSessionResumed), seqOf(t, h, s.ID, lt.EventToolStarted))
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 2, "no call was made twice")
	checkJournal(t, h.store, s.ID)
}

// TestPauseQueuedSession: a session no worker has started is paused at
// once and its turn never starts until it is resumed.
func TestPauseQueuedSession(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()
	s := create(t, h, spec(t, `[{"text":"done"}]`), nil)
	require.Equal(t, lt.SessionQueued, s.Status)
	s = pauseNow(t, h, s.ID)
	require.Equal(t, lt.SessionPaused, s.Status, "paused at once")
	require.False(t, s.PauseRequested)
	requireReleased(t, h, s.ID)
	require.Empty(t, events(t, h, s.ID, lt.EventSessionPauseRequested), "no request: it took effect at once")

	h.start("node-a")
	s = resume(t, h, s.ID)
	require.Equal(t, lt.SessionQueued, s.Status, "its turn had not started")
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "done", mustTurnOutput(t, h, s))
	require.Less(t, seqOf(t, h, s.ID, lt.EventSessionResumed), seqOf(t, h, s.ID, lt.EventTurnStarted))
	checkJournal(t, h.store, s.ID)
}

// TestPauseWhileRequiresAction: a session parked on an approval is paused
// at once and keeps its action pending; a decision taken while paused is
// recorded but runs nothing; resumed, the approved call runs.
func TestPauseWhileRequiresAction(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo approved"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "shell"})
	sp.Policies = []lt.Policy{{Tool: "shell", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]

	s = pauseNow(t, h, s.ID)
	require.Equal(t, lt.SessionPaused, s.Status, "no worker held it: paused at once")
	require.Len(t, s.RequiredActions, 1, "the action stays pending")
	require.Equal(t, lt.ActionPending, s.RequiredActions[0].Status)
	requireReleased(t, h, s.ID)

	decided, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: act.ArgumentsSHA256})
	require.NoError(t, err)
	require.Equal(t, lt.ActionResolved, decided.Status, "the decision is recorded")
	s, err = h.eng.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionPaused, s.Status, "still paused")
	require.Empty(t, s.RequiredActions)
	requireReleased(t, h, s.ID)
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted), "nothing ran")

	s = resume(t, h, s.ID)
	require.Equal(t, lt.SessionRunning, s.Status, "nothing pending: it runs")
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "done", mustTurnOutput(t, h, s))
	require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1)
	require.Less(t, seqOf(t, h, s.ID, lt.EventSessionResumed), seqOf(t, h, s.ID, lt.EventToolStarted))
	checkJournal(t, h.store, s.ID)
}

// TestPauseResumeKeepsActionPending: resuming a session whose action is
// still pending makes it requires_action again, holding no worker.
func TestPauseResumeKeepsActionPending(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"tool_calls":[{"name":"ask_human","arguments":{"question":"Which city?"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "ask_human"})
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	pauseNow(t, h, s.ID)
	s = resume(t, h, s.ID)
	require.Equal(t, lt.SessionRequiresAction, s.Status)
	require.Len(t, s.RequiredActions, 1)
	row, err := h.store.SessionGet(context.Background(), s.ID)
	require.NoError(t, err)
	require.False(t, row.Runnable)
	checkJournal(t, h.store, s.ID)
}

// TestPauseWhileWaitingOnTimer: a sleeping session is paused at once; its
// timer coming due while paused fires nothing; on resume it fires, with
// the wake time it always had.
func TestPauseWhileWaitingOnTimer(t *testing.T) {
	h := newHarness(t)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"sleep","arguments":{"seconds":3600}}]},{"text":"awake"}]`,
		lt.ToolSpec{Name: "sleep"}), nil)
	s = h.waitStatus(s.ID, lt.SessionWaiting)
	until := data[lt.WaitStartedData](t, events(t, h, s.ID, lt.EventWaitStarted)[0]).Until
	require.NotNil(t, until)

	s = pauseNow(t, h, s.ID)
	require.Equal(t, lt.SessionPaused, s.Status)
	h.clock.Advance(2 * time.Hour) // past the wake time
	requireReleased(t, h, s.ID)
	s, err := h.eng.GetSession(context.Background(), s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionPaused, s.Status)
	require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted), "the timer did not fire while paused")

	s = resume(t, h, s.ID)
	require.Equal(t, lt.SessionWaiting, s.Status, "the wait is not over until its worker ends it")
	s = h.waitStatus(s.ID, lt.SessionIdle)
	completed := events(t, h, s.ID, lt.EventToolCompleted)
	require.Len(t, completed, 1, "the timer fired once, on resume")
	require.Less(t, seqOf(t, h, s.ID, lt.EventSessionResumed), completed[0].Seq)
	var out struct {
		SleptUntil time.Time `json:"slept_until"`
	}
	require.NoError(t, json.Unmarshal(data[lt.ToolCompletedData](t, completed[0]).Output, &out))
	require.True(t, out.SleptUntil.Equal(*until), "the timer kept its time: %s, want %s", out.SleptUntil, *until)
	require.Equal(t, "awake", mustTurnOutput(t, h, s))
	checkJournal(t, h.store, s.ID)
}

// TestPauseTimeDoesNotCount: the time a session spends paused counts
// toward neither its wall-clock budget nor its turn's timeout. The same
// two hours without a pause exhaust both (the control cases).
func TestPauseTimeDoesNotCount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  *lt.Budget
		timeout int64
		pause   bool
		want    lt.SessionStatus
		stop    string
	}{
		{name: "wall budget, paused", budget: &lt.Budget{MaxWallSeconds: 600}, pause: true, want: lt.SessionIdle},
		{name: "wall budget, not paused", budget: &lt.Budget{MaxWallSeconds: 600}, want: lt.SessionFailed, stop: lt.StopBudgetExceeded},
		{name: "turn timeout, paused", timeout: 600, pause: true, want: lt.SessionIdle},
		{name: "turn timeout, not paused", timeout: 600, want: lt.SessionFailed, stop: lt.StopTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo ok"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "shell"})
			sp.Policies = []lt.Policy{{Tool: "shell", Decision: lt.PolicyAsk}}
			sp.TurnTimeoutSeconds = tc.timeout
			s := create(t, h, sp, tc.budget)
			s = h.waitStatus(s.ID, lt.SessionRequiresAction)
			act := s.RequiredActions[0]
			h.clock.Advance(5 * time.Minute) // working time: half the limit
			if tc.pause {
				pauseNow(t, h, s.ID)
			}
			h.clock.Advance(2 * time.Hour)
			if tc.pause {
				resume(t, h, s.ID)
			}
			h.clock.Advance(4 * time.Minute) // 9 minutes of working time in all
			_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: act.ArgumentsSHA256})
			require.NoError(t, err)
			s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
			require.Equal(t, tc.want, s.Status)
			if tc.stop != "" {
				require.NotNil(t, s.StopReason)
				require.Equal(t, tc.stop, *s.StopReason)
				require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
			} else {
				require.Equal(t, "done", mustTurnOutput(t, h, s))
			}
			checkJournal(t, h.store, s.ID)
		})
	}
}

// TestPauseMovesInFlightDeadline: the wall-clock deadline that cuts a call
// in flight is moved by the time paused: a call that runs past the
// session's creation plus max_wall_seconds, but not past its working time,
// is not cut.
func TestPauseMovesInFlightDeadline(t *testing.T) {
	g := newGate()
	h := newGatedHarness(t, g)
	sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo ok"}}]},{"delay_ms":1000,"text":"done"}]`, lt.ToolSpec{Name: "shell"})
	sp.Policies = []lt.Policy{{Tool: "shell", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, &lt.Budget{MaxWallSeconds: 30})
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	pauseNow(t, h, s.ID)
	h.clock.Advance(time.Hour)
	resume(t, h, s.ID)
	_, err := h.eng.DecideAction(context.Background(), s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: act.ArgumentsSHA256})
	require.NoError(t, err)
	g.await(t) // the second model call is in flight
	// An hour and 21 s since creation, 21 s of work: the call's deadline
	// watcher (which re-reads the clock) must not cut it. (Within the
	// lease's 30 s, which its worker renews meanwhile.)
	h.clock.Advance(21 * time.Second)
	g.open(t)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status)
	require.Empty(t, events(t, h, s.ID, lt.EventModelFailed))
	checkJournal(t, h.store, s.ID)
}

// TestCancelWhilePaused: a paused session can be cancelled; its pause ends
// with its turns.
func TestCancelWhilePaused(t *testing.T) {
	h := newHarness(t)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"sleep","arguments":{"seconds":3600}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "sleep"}), nil)
	h.waitStatus(s.ID, lt.SessionWaiting)
	pauseNow(t, h, s.ID)
	cancelNow(t, h, s.ID)
	s = requireCancelled(t, h, s.ID)
	require.False(t, s.PauseRequested)
	require.Len(t, events(t, h, s.ID, lt.EventTurnCancelled), 1)
	require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted))
	checkJournal(t, h.store, s.ID)
}

// TestPauseConflicts: pause and resume answer 404 for an unknown session
// and 409 in a state they do not apply to; pausing twice is idempotent.
func TestPauseConflicts(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, err := h.eng.PauseSession(ctx, "ses_missing", &lt.PauseRequest{})
	requireAPIError(t, err, lt.CodeNotFound, "ses_missing")
	_, err = h.eng.ResumeSession(ctx, "ses_missing", &lt.ResumeRequest{})
	requireAPIError(t, err, lt.CodeNotFound, "ses_missing")

	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"sleep","arguments":{"seconds":3600}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "sleep"}), nil)
	h.waitStatus(s.ID, lt.SessionWaiting)
	_, err = h.eng.ResumeSession(ctx, s.ID, &lt.ResumeRequest{})
	requireAPIError(t, err, lt.CodeConflict, "is not paused")
	pauseNow(t, h, s.ID)
	again := pauseNow(t, h, s.ID)
	require.Equal(t, lt.SessionPaused, again.Status)
	require.Len(t, events(t, h, s.ID, lt.EventSessionPaused), 1, "a second pause changes nothing")
	resume(t, h, s.ID)
	_, err = h.eng.ResumeSession(ctx, s.ID, &lt.ResumeRequest{})
	requireAPIError(t, err, lt.CodeConflict, "is not paused")

	_, err = h.eng.PauseSession(ctx, s.ID, &lt.PauseRequest{Reason: string(make([]byte, 5000))})
	requireAPIError(t, err, lt.CodeInvalidRequest, "reason")

	cancelNow(t, h, s.ID)
	requireCancelled(t, h, s.ID)
	_, err = h.eng.PauseSession(ctx, s.ID, &lt.PauseRequest{})
	requireAPIError(t, err, lt.CodeConflict, "is cancelled")
	_, err = h.eng.ResumeSession(ctx, s.ID, &lt.ResumeRequest{})
	requireAPIError(t, err, lt.CodeConflict, "is not paused")

	done := create(t, h, spec(t, `[{"text":"done"}]`), nil)
	h.waitStatus(done.ID, lt.SessionIdle)
	_, err = h.eng.PauseSession(ctx, done.ID, &lt.PauseRequest{})
	requireAPIError(t, err, lt.CodeConflict, "is idle")
	checkJournal(t, h.store, s.ID)
}

// TestResumeWithdrawsRequest: a resume before the pause took effect
// withdraws it; the call in flight finishes and the turn goes on.
func TestResumeWithdrawsRequest(t *testing.T) {
	g := newGate()
	h := newGatedHarness(t, g)
	s := create(t, h, spec(t, `[{"delay_ms":1000,"text":"done"}]`), nil)
	g.await(t)
	require.True(t, pauseNow(t, h, s.ID).PauseRequested)
	r := resume(t, h, s.ID)
	require.False(t, r.PauseRequested)
	require.Equal(t, lt.SessionRunning, r.Status)
	g.open(t)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Empty(t, events(t, h, s.ID, lt.EventSessionPaused))
	checkJournal(t, h.store, s.ID)
}

// TestPauseSurvivesRestart: a pause requested while the session's worker
// is dead is carried out by the worker that picks the session up, before
// anything runs; a paused session stays paused across restarts of the
// engine, and resumed, it makes the call its dead worker had in flight.
func TestPauseSurvivesRestart(t *testing.T) {
	g := newGate()
	h := newGatedHarness(t, g)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"delay_ms":1000,"text":"done"}]`), nil)
	g.await(t)
	hard, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, h.eng.Stop(hard)) // the worker dies mid-call
	p := pauseNow(t, h, s.ID)
	require.True(t, p.PauseRequested, "its status says running: the next worker pauses it")

	h.start("node-a") // the same node restarts: its old leases expire at once
	s = h.waitStatus(s.ID, lt.SessionPaused)
	requireReleased(t, h, s.ID)
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1, "nothing ran before the pause")

	h.restart("node-a")
	s, err := h.eng.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionPaused, s.Status)
	requireReleased(t, h, s.ID)

	resume(t, h, s.ID)
	g.await(t)
	g.open(t)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "done", mustTurnOutput(t, h, s))
	checkJournal(t, h.store, s.ID)
}

// TestPauseHoldsThroughATurnEndedByADecision: a person stops an approval
// while the session is paused: that turn fails, and the follow-up turn
// queued behind it waits for the resume (the session stays paused).
func TestPauseHoldsThroughATurnEndedByADecision(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo never"}}]},{"text":"second turn done"}]`, lt.ToolSpec{Name: "shell"})
	sp.Policies = []lt.Policy{{Tool: "shell", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "and then"})
	require.NoError(t, err)
	pauseNow(t, h, s.ID)

	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionStop})
	require.NoError(t, err)
	s, err = h.eng.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionPaused, s.Status, "the next turn waits for the resume")
	requireReleased(t, h, s.ID)
	require.Len(t, events(t, h, s.ID, lt.EventTurnFailed), 1)
	require.Len(t, events(t, h, s.ID, lt.EventTurnStarted), 1, "the follow-up did not start")

	s = resume(t, h, s.ID)
	require.Equal(t, lt.SessionQueued, s.Status)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "second turn done", mustTurnOutput(t, h, s))
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
	checkJournal(t, h.store, s.ID)
}

// TestPauseWhileWaitingForSignal: a signal that comes while the session is
// paused is recorded (its wait has it) but wakes nothing; on resume the
// wait ends with it.
func TestPauseWhileWaitingForSignal(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"wait_for_signal","arguments":{"name":"go.ahead"}}]},{"text":"went"}]`,
		lt.ToolSpec{Name: "wait_for_signal"}), nil)
	h.waitStatus(s.ID, lt.SessionWaiting)
	pauseNow(t, h, s.ID)
	sig, err := h.eng.SendSignal(ctx, s.ID, &lt.SignalRequest{Name: "go.ahead", Payload: json.RawMessage(`"now"`)})
	require.NoError(t, err)
	require.True(t, sig.Delivered, "the paused wait has it")
	requireReleased(t, h, s.ID)
	require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted))

	s = resume(t, h, s.ID)
	require.Equal(t, lt.SessionRunning, s.Status, "its wait is over: it runs")
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Contains(t, string(data[lt.ToolCompletedData](t, events(t, h, s.ID, lt.EventToolCompleted)[0]).Output), `"payload":"now"`)
	require.Equal(t, "went", mustTurnOutput(t, h, s))
	checkJournal(t, h.store, s.ID)
}

// TestSteerWhilePausedAndAPersonsFile: a paused session is steered (with
// interrupt, which has no call to cut) and a person writes a file; nothing
// runs until the resume, and then the next step call carries both, once:
// the file change, then the message (transcript: changes before steers).
func TestSteerWhilePausedAndAPersonsFile(t *testing.T) {
	h, p := newSteerHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo approved"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "shell"})
	sp.Policies = []lt.Policy{{Tool: "shell", Decision: lt.PolicyAsk}}
	p.open()
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	pauseNow(t, h, s.ID)

	steer(t, h, s.ID, "Stop after this command.", true)
	_, err := h.eng.WriteFile(ctx, s.ID, "hint.txt", []byte("a person's hint"), "")
	require.NoError(t, err)
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: act.ArgumentsSHA256})
	require.NoError(t, err)
	s, err = h.eng.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionPaused, s.Status)
	require.Len(t, p.sent(), 1, "no model call while paused")
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted), "nothing ran while paused")

	resume(t, h, s.ID)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Empty(t, events(t, h, s.ID, lt.EventModelFailed), "no call was cut")
	reqs := p.sent()
	require.Len(t, reqs, 2)
	next := reqs[1].Messages
	n := len(next)
	require.Equal(t, model.RoleTool, next[n-3].Role)
	require.Contains(t, next[n-2].Text, "hint.txt", "the person's file change")
	require.Equal(t, user("Stop after this command."), next[n-1], "then the message, verbatim")
	checkJournal(t, h.store, s.ID)
}

// TestPauseRequestedThenCancelHeldByAnInDoubtCall: a pause is asked while
// an irreversible shell command runs, then a cancel cuts the command: the
// call is in doubt, which holds the cancel, and the pause takes effect. A
// second pause or a steer is refused while the cancel is pending; a
// person may still change the files. Deciding the call did not happen
// ends the turn as cancelled, without running the call again, though the
// session was paused.
func TestPauseRequestedThenCancelHeldByAnInDoubtCall(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := uniqueSleep()
	args, err := json.Marshal(map[string]string{"command": "echo x >> " + marker + "; " + cmd})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	waitFileHolds(t, marker, "x\n")
	waitProcs(t, cmd, 1)
	require.True(t, pauseNow(t, h, s.ID).PauseRequested)
	cancelNow(t, h, s.ID)
	s = h.waitStatus(s.ID, lt.SessionPaused)
	waitProcs(t, cmd, 0)
	require.True(t, s.CancelRequested)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	requireReleased(t, h, s.ID)

	_, err = h.eng.PauseSession(ctx, s.ID, &lt.PauseRequest{})
	require.NoError(t, err, "already paused: a repeated pause changes nothing")
	_, err = h.eng.SteerSession(ctx, s.ID, &lt.SteerRequest{Input: "go on"})
	requireAPIError(t, err, lt.CodeConflict, "being cancelled")
	_, err = h.eng.WriteFile(ctx, s.ID, "note.txt", []byte("a person's note"), "")
	require.NoError(t, err)

	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	s = requireCancelled(t, h, s.ID)
	require.False(t, s.CancelRequested)
	require.False(t, s.PauseRequested)
	lines, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "x\n", string(lines), "the call did not run again")
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 1)
	checkJournal(t, h.store, s.ID)
}
