package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// lossyBackend opens the real local environments and reports, after a
// command (or a read of a path) containing marker really ran, that the
// environment went away (environment.ErrLost), as a remote runner whose
// connection broke before the outcome came back does: the program ran, the
// engine cannot know it.
type lossyBackend struct {
	environment.Backend
	marker string

	// unreachable: the calls naming marker are refused before they run
	// (environment.ErrUnavailable) instead of lost after.
	unreachable bool

	mu   sync.Mutex
	left int // losses still to report (negative: every time)
	// holdsLost: Holds checks still to lose (the environment went away
	// between two calls, found by the check before the next one).
	holdsLost int
}

func (b *lossyBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	env, err := b.Backend.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &lossyEnv{Environment: env, b: b}, nil
}

// lose reports whether this call is to be lost.
func (b *lossyBackend) lose(s string) bool {
	if !strings.Contains(s, b.marker) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left == 0 {
		return false
	}
	b.left--
	return true
}

var errLinkClosed = fmt.Errorf("the runner's connection closed: %w", environment.ErrLost)

type lossyEnv struct {
	environment.Environment
	b *lossyBackend
}

var errNoRunner = fmt.Errorf("no runner of the session is connected: %w", environment.ErrUnavailable)

func (e *lossyEnv) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	if e.b.unreachable && e.b.lose(req.Command) {
		return nil, errNoRunner
	}
	res, err := e.Environment.Run(ctx, req)
	if err == nil && e.b.lose(req.Command) {
		return nil, errLinkClosed
	}
	return res, err
}

func (e *lossyEnv) Holds(ctx context.Context, id string) (bool, error) {
	e.b.mu.Lock()
	lose := e.b.holdsLost > 0
	if lose {
		e.b.holdsLost--
	}
	e.b.mu.Unlock()
	if lose {
		return false, errLinkClosed
	}
	return e.Environment.Holds(ctx, id)
}

func (e *lossyEnv) ReadFile(ctx context.Context, rel string, offset, limit int64) (*workspace.ReadResult, error) {
	res, err := e.Environment.ReadFile(ctx, rel, offset, limit)
	if err == nil && e.b.lose(rel) {
		return nil, errLinkClosed
	}
	return res, err
}

// newLossyHarness is a harness whose environments lose the calls naming
// marker, times times (negative: always).
func newLossyHarness(t *testing.T, marker string, times int) *harness {
	return newLossyHarnessWith(t, &lossyBackend{marker: marker, left: times})
}

// newLossyHarnessWith is newLossyHarness with lossy's settings (its
// Backend is set to the local one).
func newLossyHarnessWith(t *testing.T, lossy *lossyBackend) *harness {
	t.Helper()
	return newWrappedHarness(t, func(b environment.Backend) environment.Backend {
		lossy.Backend = b
		return lossy
	})
}

// TestEnvironmentLostMidCallRunsItAgain: a shell call (declared
// idempotent) or a read whose environment went away after it ran is
// handled as a crash after tool.started: run again, with the same
// idempotency key, once the environment is opened again; the session
// completes and the journal shows both attempts.
func TestEnvironmentLostMidCallRunsItAgain(t *testing.T) {
	t.Run("idempotent shell", func(t *testing.T) {
		h := newLossyHarness(t, "LOSE", 1)
		s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo \"$LONGHAUL_IDEMPOTENCY_KEY\" >> ran.log; echo LOSE"}}]},{"text":"done"}]`,
			lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)
		h.waitStatus(s.ID, lt.SessionIdle)

		started := events(t, h, s.ID, lt.EventToolStarted)
		require.Len(t, started, 2, "the lost attempt and the one after it; the journal:\n%s", journalText(t, h, s.ID))
		first, second := data[lt.ToolStartedData](t, started[0]), data[lt.ToolStartedData](t, started[1])
		require.Equal(t, first.IdempotencyKey, second.IdempotencyKey)
		require.Equal(t, 2, second.Attempt)
		require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1)
		require.Empty(t, events(t, h, s.ID, lt.EventEffectInDoubt))
		log, err := os.ReadFile(filepath.Join(h.dir, "workspaces", s.ID, "ran.log"))
		require.NoError(t, err)
		require.Equal(t, first.IdempotencyKey+"\n"+first.IdempotencyKey+"\n", string(log), "it ran twice, with its key both times")
		checkJournal(t, h.store, s.ID)
	})
	t.Run("read", func(t *testing.T) {
		h := newLossyHarness(t, "LOSE", 1)
		s := create(t, h, spec(t, `[
		  {"tool_calls":[{"name":"write_file","arguments":{"path":"LOSE.md","content":"kept"}}]},
		  {"tool_calls":[{"name":"read_file","arguments":{"path":"LOSE.md"}}]},
		  {"text":"done"}]`, lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "read_file"}), nil)
		h.waitStatus(s.ID, lt.SessionIdle)

		var reads []lt.ToolStartedData
		for _, ev := range events(t, h, s.ID, lt.EventToolStarted) {
			if d := data[lt.ToolStartedData](t, ev); d.Tool == "read_file" {
				reads = append(reads, d)
			}
		}
		require.Len(t, reads, 2, "the journal:\n%s", journalText(t, h, s.ID))
		var out []string
		for _, ev := range events(t, h, s.ID, lt.EventToolCompleted) {
			out = append(out, string(data[lt.ToolCompletedData](t, ev).Output))
		}
		require.Len(t, out, 2)
		require.Contains(t, out[1], `"content":"kept"`)
		require.Empty(t, events(t, h, s.ID, lt.EventToolFailed), "the loss is not the model's: no failure it sees")
		checkJournal(t, h.store, s.ID)
	})
}

// TestEnvironmentLostIrreversibleIsInDoubt: an irreversible call (the
// shell's default) whose environment went away mid-call is never run
// again blindly: it is in doubt, saying why, and ran once.
func TestEnvironmentLostIrreversibleIsInDoubt(t *testing.T) {
	h := newLossyHarness(t, "LOSE", 1)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo once >> ran.log; echo LOSE"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Contains(t, act.Summary, "environment went away during the call")
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 1, "the journal:\n%s", journalText(t, h, s.ID))
	require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted, lt.EventToolFailed))
	log, err := os.ReadFile(filepath.Join(h.dir, "workspaces", s.ID, "ran.log"))
	require.NoError(t, err)
	require.Equal(t, "once\n", string(log))
	checkJournal(t, h.store, s.ID)
}

// TestEnvironmentLostEveryTimeEndsTheTurn: an environment lost at every
// attempt does not loop: after a bounded number of fresh starts the turn
// fails, saying so.
func TestEnvironmentLostEveryTimeEndsTheTurn(t *testing.T) {
	h := newLossyHarness(t, "LOSE", -1)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo LOSE"}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	failed := events(t, h, s.ID, lt.EventTurnFailed)
	require.Len(t, failed, 1)
	require.Contains(t, data[lt.TurnFailedData](t, failed[0]).Error, "environment went away during a call")
	require.LessOrEqual(t, len(events(t, h, s.ID, lt.EventToolStarted)), 5)
}

// TestEnvironmentUnavailableFailsTheCall: a call refused because its
// environment cannot be reached did not run; until the session can park
// for its runner, it fails saying so (an irreversible call: to the model),
// and nothing is in doubt.
func TestEnvironmentUnavailableFailsTheCall(t *testing.T) {
	h := newLossyHarnessWith(t, &lossyBackend{marker: "UNREACHABLE", left: 1, unreachable: true})
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo ran >> ran.log; echo UNREACHABLE"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Contains(t, data[lt.ToolFailedData](t, failed[0]).Error, "cannot be reached (nothing ran)")
	require.Empty(t, events(t, h, s.ID, lt.EventEffectInDoubt))
	require.NoFileExists(t, filepath.Join(h.dir, "workspaces", s.ID, "ran.log"))
	checkJournal(t, h.store, s.ID)
}

// TestEnvironmentLostBetweenCalls: an environment found gone by the check
// before a call (Holds) is not an internal error: the runner starts over
// with the environment opened again, and the session goes on.
func TestEnvironmentLostBetweenCalls(t *testing.T) {
	h := newLossyHarnessWith(t, &lossyBackend{marker: "never named", holdsLost: 1})
	s := create(t, h, spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"a.md","content":"kept"}}]},
	  {"tool_calls":[{"name":"read_file","arguments":{"path":"a.md"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "read_file"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	var out []string
	for _, ev := range events(t, h, s.ID, lt.EventToolCompleted) {
		out = append(out, string(data[lt.ToolCompletedData](t, ev).Output))
	}
	require.Len(t, out, 2)
	require.Contains(t, out[1], `"content":"kept"`)
	require.Empty(t, events(t, h, s.ID, lt.EventTurnFailed, lt.EventToolFailed))
	checkJournal(t, h.store, s.ID)
}

// TestEnvironmentLostRestartsBackOff: each start over after a loss waits
// longer on the engine's clock (1 s, then 2 s), so a runner whose
// connection keeps breaking is not hammered.
func TestEnvironmentLostRestartsBackOff(t *testing.T) {
	h := newLossyHarness(t, "LOSE", 2)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo LOSE"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 3, "two lost attempts and the one after; the journal:\n%s", journalText(t, h, s.ID))
	var backoffs []time.Duration
	for _, d := range h.clock.waits() {
		if d == time.Second || d == 2*time.Second {
			backoffs = append(backoffs, d)
		}
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, backoffs)
}

// journalText is the session's journal, one event a line (seq, type and
// data as text), for a failure to show which path the session took: a
// call lost and run again, or one that failed without being lost (its
// environment could not start it), which the model is told of and which
// ends the turn idle after a single tool.started.
func journalText(t *testing.T, h *harness, id string) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range events(t, h, id) {
		fmt.Fprintf(&b, "%d %s %s\n", ev.Seq, ev.Type, ev.Data)
	}
	return b.String()
}

// probedTool is an irreversible tool with a reconcile probe whose first
// run loses its environment (environment.ErrLost) after it ran. It
// records the environment each run and probe was given.
type probedTool struct {
	mu     sync.Mutex
	runs   []tool.Exec
	probes []tool.Exec
}

func (t *probedTool) Name() string           { return "deploy" }
func (t *probedTool) Description() string    { return "Deploy." }
func (t *probedTool) Effect() lt.EffectClass { return lt.EffectIrreversible }
func (t *probedTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object"}`)
}

func (t *probedTool) Run(_ context.Context, call *tool.Call) (*tool.Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs = append(t.runs, call.Exec)
	if len(t.runs) == 1 {
		return nil, errLinkClosed
	}
	return &tool.Result{Output: "deployed"}, nil
}

func (t *probedTool) Reconcile(_ context.Context, call *tool.Call) (*tool.Reconciliation, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.probes = append(t.probes, call.Exec)
	return &tool.Reconciliation{Happened: true, Output: "found deployed"}, nil
}

// TestEnvironmentLostProbesInTheNewEnvironment: an irreversible call whose
// environment went away is probed only once the environment is opened
// again (the lost one may still be running the attempt), never in the
// lost one; the probe settles it, and it does not run again.
func TestEnvironmentLostProbesInTheNewEnvironment(t *testing.T) {
	pt := &probedTool{}
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}, tools: append(tool.Builtins(), pt)}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	lossy := &lossyBackend{marker: "never"}
	h.wrapEnvironments = func(b environment.Backend) environment.Backend {
		lossy.Backend = b
		return lossy
	}
	h.start("node-a")
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"deploy","arguments":{}}]},{"text":"done"}]`, lt.ToolSpec{Name: "deploy"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	require.Len(t, pt.runs, 1, "an irreversible call is never run again")
	require.Len(t, pt.probes, 1)
	require.NotNil(t, pt.probes[0])
	require.NotSame(t, pt.runs[0], pt.probes[0], "probed in the environment opened again, not the lost one")
	completed := events(t, h, s.ID, lt.EventToolCompleted)
	require.Len(t, completed, 1)
	require.Equal(t, lt.ResolutionReconciled, data[lt.ToolCompletedData](t, completed[0]).Resolution)
	checkJournal(t, h.store, s.ID)
}
