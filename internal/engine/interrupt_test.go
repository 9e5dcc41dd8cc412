package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The session's wall-clock budget and the turn's timeout interrupt a call
// in flight (interrupt.go). The engine's clock is the harness's fake one:
// nothing is interrupted until the test moves it past the deadline, so
// every test first sees the call running, then moves the clock. The
// deadlines are 20 s and the clock moves 21 s at once: less than the lease
// (30 s), so the worker running the call keeps it and is the one that
// interrupts the call.

// uniqueSleep is a `sleep` command with a duration no other process on the
// machine has, so the host's process table tells whether it still runs.
func uniqueSleep() string {
	return fmt.Sprintf("sleep 30.%06d", rand.IntN(1_000_000))
}

// hostProcs returns the pids of the host's processes whose command line is
// needle (Linux /proc). Not those that contain it: the reaper a plain
// command runs under names the command in its arguments before it runs,
// and a shell running "echo started; sleep 30.1 & sleep 30.2" (and the
// copies of itself it forks for each) would count as a sleep that runs
// before the echo has.
func hostProcs(t *testing.T, needle string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.TrimSpace(args) == needle {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitProcs polls the host's process table until want processes match
// needle (0: until none does).
func waitProcs(t *testing.T, needle string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := hostProcs(t, needle)
		if (want == 0 && len(got) == 0) || (want > 0 && len(got) >= want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes matching %q: %v, want %d", needle, got, want)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// waitEvent polls until the session journaled an event of type typ.
func waitEvent(t *testing.T, h *harness, id, typ string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(events(t, h, id, typ)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("session %s journaled no %s", id, typ)
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

func requireStopped(t *testing.T, h *harness, id, reason string) *lt.Session {
	t.Helper()
	s := h.waitStatus(id, lt.SessionFailed)
	require.NotNil(t, s.StopReason)
	require.Equal(t, reason, *s.StopReason)
	return s
}

// TestWallInterruptsShell: max_wall_seconds kills a shell command in flight
// (its whole process group: a background child too), the call is
// journaled as interrupted with the output it wrote, and the turn stops
// with budget_exceeded. The command is declared idempotent, so it simply
// failed.
func TestWallInterruptsShell(t *testing.T) {
	h := newHarness(t)
	cmd, bg := uniqueSleep(), uniqueSleep()
	args, err := json.Marshal(map[string]string{"command": "echo started; " + bg + " & " + cmd + "; echo never"})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), &lt.Budget{MaxWallSeconds: 20})
	waitProcs(t, cmd, 1)
	waitProcs(t, bg, 1)
	require.Equal(t, lt.SessionRunning, h.waitStatus(s.ID, lt.SessionRunning).Status)

	h.clock.Advance(21 * time.Second)
	requireStopped(t, h, s.ID, lt.StopBudgetExceeded)
	waitProcs(t, cmd, 0)
	waitProcs(t, bg, 0)

	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	d := data[lt.ToolFailedData](t, failed[0])
	require.Equal(t, "max_wall_seconds", d.Interrupted)
	require.Contains(t, d.Error, "interrupted: the session's wall-clock budget ran out (max_wall_seconds 20)")
	require.Contains(t, string(d.Output), "started")
	require.NotContains(t, string(d.Output), "never")
	require.Len(t, events(t, h, s.ID, lt.EventBudgetExceeded), 1)
	effects, err := h.eng.ListEffects(context.Background(), s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, lt.EffectFailed, effects[0].Status)
	checkJournal(t, h.store, s.ID)
}

// TestTurnTimeoutInterruptsShell: turn_timeout_seconds does the same, and
// the turn stops with timeout.
func TestTurnTimeoutInterruptsShell(t *testing.T) {
	h := newHarness(t)
	cmd := uniqueSleep()
	sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"`+cmd+`"}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell", Effect: lt.EffectRead})
	sp.TurnTimeoutSeconds = 20
	s := create(t, h, sp, nil)
	waitProcs(t, cmd, 1)
	h.clock.Advance(21 * time.Second)
	s = requireStopped(t, h, s.ID, lt.StopTimeout)
	waitProcs(t, cmd, 0)
	d := data[lt.ToolFailedData](t, events(t, h, s.ID, lt.EventToolFailed)[0])
	require.Equal(t, "turn_timeout", d.Interrupted)
	require.Contains(t, d.Error, "the turn ran past its timeout of 20 s")
	require.Empty(t, events(t, h, s.ID, lt.EventBudgetExceeded))
	checkJournal(t, h.store, s.ID)
}

// TestFirstDeadlineWins: with both limits set, the one that comes first
// cuts the call and names the stop.
func TestFirstDeadlineWins(t *testing.T) {
	for _, tc := range []struct {
		name         string
		wall, turn   int64
		advance      time.Duration
		reason, kind string
	}{
		{"turn timeout first", 25, 20, 21 * time.Second, lt.StopTimeout, "turn_timeout"},
		{"wall first", 20, 25, 21 * time.Second, lt.StopBudgetExceeded, "max_wall_seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			cmd := uniqueSleep()
			sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"`+cmd+`"}}]},{"text":"never"}]`,
				lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent})
			sp.TurnTimeoutSeconds = tc.turn
			s := create(t, h, sp, &lt.Budget{MaxWallSeconds: tc.wall})
			waitProcs(t, cmd, 1)
			h.clock.Advance(tc.advance)
			s = requireStopped(t, h, s.ID, tc.reason)
			waitProcs(t, cmd, 0)
			require.Equal(t, tc.kind, data[lt.ToolFailedData](t, events(t, h, s.ID, lt.EventToolFailed)[0]).Interrupted)
		})
	}
}

// TestInterruptedIrreversibleCallIsInDoubt: an irreversible command cut
// midway may have taken effect: it becomes in doubt (effect.in_doubt and an
// in_doubt action saying why), is not run again when a person says it did
// not happen (the deadline has passed), and the turn then stops.
func TestInterruptedIrreversibleCallIsInDoubt(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := uniqueSleep()
	args, err := json.Marshal(map[string]string{"command": "echo x >> " + marker + "; " + cmd})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell"}), &lt.Budget{MaxWallSeconds: 20})
	waitProcs(t, cmd, 1)
	h.clock.Advance(21 * time.Second)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	waitProcs(t, cmd, 0)

	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Equal(t, "shell", act.Tool)
	require.Contains(t, act.Summary, "interrupted in flight: the session's wall-clock budget ran out")
	require.NotEmpty(t, act.Evidence)
	doubt := events(t, h, s.ID, lt.EventEffectInDoubt)
	require.Len(t, doubt, 1)
	require.Contains(t, data[lt.EffectInDoubtData](t, doubt[0]).Reason, "max_wall_seconds 20")
	require.Empty(t, events(t, h, s.ID, lt.EventToolFailed), "an irreversible call cut midway is not a plain failure")

	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	requireStopped(t, h, s.ID, lt.StopBudgetExceeded)
	lines, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "x\n", string(lines), "past the deadline the call must not run again")
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 1)
	checkJournal(t, h.store, s.ID)
}

// TestTurnTimeoutInterruptsModelCall: a model that does not answer
// (delay_ms) is abandoned at the turn's timeout; the abandoned call counts
// the input it was sent, and the turn stops with timeout.
func TestTurnTimeoutInterruptsModelCall(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"delay_ms":600000,"text":"too late"}]`)
	sp.TurnTimeoutSeconds = 20
	s := create(t, h, sp, nil)
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	h.waitStatus(s.ID, lt.SessionRunning)
	h.clock.Advance(21 * time.Second)
	s = requireStopped(t, h, s.ID, lt.StopTimeout)

	failed := events(t, h, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 1)
	d := data[lt.ModelFailedData](t, failed[0])
	require.Equal(t, "timeout", d.Kind)
	require.Equal(t, "turn_timeout", d.Interrupted)
	require.False(t, d.Retry)
	require.NotNil(t, d.Usage)
	require.Positive(t, d.Usage.InputTokens)
	require.Empty(t, events(t, h, s.ID, lt.EventModelResponded))
	require.Equal(t, int64(1), s.Usage.ModelCalls)
	require.Equal(t, d.Usage.InputTokens, s.Usage.InputTokens, "the abandoned call's input is counted")
	checkJournal(t, h.store, s.ID)
}

// TestWallInterruptsModelCall: the same for the wall-clock budget.
func TestWallInterruptsModelCall(t *testing.T) {
	h := newHarness(t)
	s := create(t, h, spec(t, `[{"delay_ms":600000,"text":"too late"}]`), &lt.Budget{MaxWallSeconds: 20})
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	h.clock.Advance(21 * time.Second)
	s = requireStopped(t, h, s.ID, lt.StopBudgetExceeded)
	d := data[lt.ModelFailedData](t, events(t, h, s.ID, lt.EventModelFailed)[0])
	require.Equal(t, "max_wall_seconds", d.Interrupted)
	require.Len(t, events(t, h, s.ID, lt.EventBudgetExceeded), 1)
	checkJournal(t, h.store, s.ID)
}

// TestDeadlineEndsADurableWait: a session parked in sleep or
// wait_for_signal holds nothing but its row, whose wake time is the first
// of the wait's end and the deadlines; at the deadline it is claimed, the
// waiting call is interrupted and the turn stops.
func TestDeadlineEndsADurableWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		call   string
		wall   int64
		turn   int64
		reason string
	}{
		{"sleep under max_wall_seconds", `{"name":"sleep","arguments":{"seconds":3600}}`, 60, 0, lt.StopBudgetExceeded},
		{"sleep under turn_timeout_seconds", `{"name":"sleep","arguments":{"seconds":3600}}`, 0, 60, lt.StopTimeout},
		{"wait_for_signal under max_wall_seconds", `{"name":"wait_for_signal","arguments":{"name":"never.comes"}}`, 60, 0, lt.StopBudgetExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			sp := spec(t, `[{"tool_calls":[`+tc.call+`]},{"text":"never"}]`, lt.ToolSpec{Name: "sleep"}, lt.ToolSpec{Name: "wait_for_signal"})
			sp.TurnTimeoutSeconds = tc.turn
			var budget *lt.Budget
			if tc.wall > 0 {
				budget = &lt.Budget{MaxWallSeconds: tc.wall}
			}
			s := create(t, h, sp, budget)
			s = h.waitStatus(s.ID, lt.SessionWaiting)
			row, err := h.store.SessionGet(context.Background(), s.ID)
			require.NoError(t, err)
			require.NotNil(t, row.WakeAt)
			require.WithinDuration(t, s.CreatedAt.Add(60*time.Second), *row.WakeAt, time.Second, "the row wakes at the deadline, not at the wait's end")

			h.clock.Advance(30 * time.Second)
			require.Equal(t, lt.SessionWaiting, h.waitStatus(s.ID, lt.SessionWaiting).Status, "before the deadline it keeps waiting")
			h.clock.Advance(31 * time.Second)
			s = requireStopped(t, h, s.ID, tc.reason)
			failed := events(t, h, s.ID, lt.EventToolFailed)
			require.Len(t, failed, 1)
			require.Contains(t, data[lt.ToolFailedData](t, failed[0]).Error, "interrupted: ")
			require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted))
			checkJournal(t, h.store, s.ID)
		})
	}
}

// TestWallInterruptsMCPCall: an MCP call that never answers is cancelled
// at the deadline; the tool is declared idempotent (so its start is
// durable before it runs, which the test waits for), so the call failed.
func TestWallInterruptsMCPCall(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"tool_calls":[{"name":"t__hang","arguments":{}}]},{"text":"never"}]`,
		testMCPServer(t, "t", func(s *lt.ToolSpec) { s.Effects = map[string]lt.EffectClass{"hang": lt.EffectIdempotent} }))
	sp.Policies = []lt.Policy{{Tool: "t__hang", Decision: lt.PolicyAllow}}
	s := create(t, h, sp, &lt.Budget{MaxWallSeconds: 20})
	waitEvent(t, h, s.ID, lt.EventToolStarted)
	h.clock.Advance(21 * time.Second)
	s = requireStopped(t, h, s.ID, lt.StopBudgetExceeded)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	d := data[lt.ToolFailedData](t, failed[0])
	require.Equal(t, "max_wall_seconds", d.Interrupted)
	require.Equal(t, "t", d.Server)
	checkJournal(t, h.store, s.ID)
}

// TestTurnTimeoutEndsWaitAgents: a parent parked in wait_agents wakes at
// its turn's timeout, stops, and its sub-agent (waiting for a signal that
// never comes) is cancelled with it.
func TestTurnTimeoutEndsWaitAgents(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t, map[string]any{"tool_calls": []any{toolCall("wait_for_signal", map[string]any{"name": "never"})}}), "wait_for_signal")
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("sleep", map[string]any{"seconds": 5})}},
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "wait forever"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "never"},
	), lt.ToolSpec{Name: "sleep"}, lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	parent.TurnTimeoutSeconds = 20
	s := create(t, h, parent, nil)
	h.waitStatus(s.ID, lt.SessionWaiting)
	// The child inherits the parent's 20 s, counted from its own turn's
	// start: spawned 5 s into the parent's turn, it times out 5 s after
	// its parent. Were both deadlines one instant, the child's own
	// timeout could report first and end the wait before the parent's
	// worker saw its deadline; that wait is over, not interrupted.
	h.clock.Advance(5 * time.Second)
	require.Eventually(t, func() bool { return len(children(t, h, s.ID)) == 1 }, testTimeout, pollEvery, "the child spawned")
	kids := children(t, h, s.ID)
	h.waitStatus(kids[0].ID, lt.SessionWaiting)
	require.Eventually(t, func() bool { return len(events(t, h, s.ID, lt.EventWaitStarted)) == 2 },
		testTimeout, pollEvery, "the parent waits for its child")
	h.waitStatus(s.ID, lt.SessionWaiting)

	h.clock.Advance(16 * time.Second) // past the parent's deadline, short of the child's
	s = requireStopped(t, h, s.ID, lt.StopTimeout)
	h.waitStatus(kids[0].ID, lt.SessionCancelled) // by its parent, before its own deadline
	var interrupted []string
	for _, ev := range events(t, h, s.ID, lt.EventToolFailed) {
		if d := data[lt.ToolFailedData](t, ev); d.Interrupted != "" {
			interrupted = append(interrupted, d.Tool+" "+d.Interrupted)
		}
	}
	require.Equal(t, []string{"wait_agents turn_timeout"}, interrupted)
	require.Eventually(t, func() bool { return len(events(t, h, s.ID, lt.EventSubagentCompleted)) == 1 },
		testTimeout, pollEvery, "the child reported its end")
	checkJournal(t, h.store, s.ID)
}

// TestWaitOverAtItsTurnDeadline: a wait that is over when its worker
// comes back ends as any wait that is over, with what ended it, even if
// the turn's deadline has passed too; the turn then stops for its timeout
// before another model call. Here the signal and the deadline both came
// while the node was stopped, so the order is fixed; a sub-agent that ends
// by the timeout it inherited, at its parent's deadline, may meet its
// parent's worker in either order (see TestTurnTimeoutEndsWaitAgents).
func TestWaitOverAtItsTurnDeadline(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"wait_for_signal","arguments":{"name":"deploy.finished"}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "wait_for_signal"})
	sp.TurnTimeoutSeconds = 20
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionWaiting)

	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()
	h.clock.Advance(21 * time.Second)
	sig, err := h.eng.SendSignal(ctx, s.ID, &lt.SignalRequest{Name: "deploy.finished", Payload: json.RawMessage(`{"ok":true}`)})
	require.NoError(t, err)
	require.True(t, sig.Delivered)
	h.start("node-a")

	s = requireStopped(t, h, s.ID, lt.StopTimeout)
	completed := events(t, h, s.ID, lt.EventToolCompleted)
	require.Len(t, completed, 1, "the wait ended with its signal")
	d := data[lt.ToolCompletedData](t, completed[0])
	require.Equal(t, "wait_for_signal", d.Tool)
	require.Contains(t, string(d.Output), `"ok":true`)
	require.Empty(t, events(t, h, s.ID, lt.EventToolFailed), "a wait that is over is not interrupted")
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 1, "no model call after the deadline")
	checkJournal(t, h.store, s.ID)
}

// gatedVerifier answers step calls from its plan and holds every
// verification call until released (or its context ends, which it
// reports).
type gatedVerifier struct {
	planProvider
	entered chan struct{}
	release chan struct{}
}

func (p *gatedVerifier) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	if len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Text, "You check whether an agent's final answer") {
		p.entered <- struct{}{}
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, fmt.Errorf("verification abandoned: %w", ctx.Err())
		}
	}
	return p.planProvider.Respond(ctx, req)
}

// TestVerificationCutByTurnTimeoutOnly: the budget checks a verification
// call only before it starts, so max_wall_seconds does not cut one in
// flight; the turn's timeout does.
func TestVerificationCutByTurnTimeoutOnly(t *testing.T) {
	const met = `{"criteria":[{"criterion":"mentions ACME","met":true,"reason":"it does"}]}`
	run := func(t *testing.T, sp *lt.AgentSpec, budget *lt.Budget) (*harness, *gatedVerifier, *lt.Session) {
		p := &gatedVerifier{planProvider: planProvider{plan: []model.Response{{Text: "ACME renews on 31 March."}}, verdicts: []string{met}},
			entered: make(chan struct{}, 1), release: make(chan struct{})}
		h := newHarnessWith(t, map[string]model.Provider{"gated": p}, nil)
		s, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{
			AgentSpec: sp, Input: "brief", AcceptanceCriteria: []string{"mentions ACME"}, Budget: budget,
		})
		require.NoError(t, err)
		select {
		case <-p.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("no verification call came")
		}
		h.clock.Advance(21 * time.Second)
		return h, p, s
	}
	t.Run("max_wall_seconds lets it answer", func(t *testing.T) {
		h, p, s := run(t, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "gated"}}, &lt.Budget{MaxWallSeconds: 20})
		close(p.release)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		require.Len(t, events(t, h, s.ID, lt.EventAcceptanceVerified), 1)
		require.Empty(t, events(t, h, s.ID, lt.EventModelFailed))
	})
	t.Run("turn_timeout_seconds cuts it", func(t *testing.T) {
		h, _, s := run(t, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "gated"}, TurnTimeoutSeconds: 20}, nil)
		s = requireStopped(t, h, s.ID, lt.StopTimeout)
		d := data[lt.ModelFailedData](t, events(t, h, s.ID, lt.EventModelFailed)[0])
		require.Equal(t, lt.PurposeVerification, d.Purpose)
		require.Equal(t, "turn_timeout", d.Interrupted)
	})
}
