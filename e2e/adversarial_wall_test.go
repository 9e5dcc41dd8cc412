package e2e

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

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The wall-clock limits bind a call in flight (issue 14, item 7): an agent
// that runs past max_wall_seconds or turn_timeout_seconds is stopped at
// the deadline, whatever it is doing — a long command, a command that
// forks a detached grandchild, ignores SIGTERM or spins the CPU, the sleep
// tool, a model that does not answer. Each case asserts from outside: the
// host's process table (nothing of the command survives), a recorder on
// loopback the agent is allowed to reach (it gets nothing after the
// deadline), and the journal. Deadlines are real and short (3 s); the tests
// poll, never sleep to wait.

// wallDeadline is the limit most cases run under: long enough for a
// sandbox to start on a loaded machine, short against the 30 s the agent
// asks for.
const wallDeadline = 3

// wallStopWithin bounds how long after its creation a session under
// wallDeadline may take to stop (the deadline, the kill, the journal).
const wallStopWithin = 15 * time.Second

// wallSandboxServer starts a server whose shell commands run in bubblewrap
// (what CI runs), or skips when a tool the cases use is missing outside CI.
func wallSandboxServer(t *testing.T) *server {
	t.Helper()
	needTools(t, "the wall-clock kill in the sandbox is not tested", "bwrap", "curl", "setsid", "nohup")
	return startServer(t, "--sandbox", "bwrap")
}

// wallMarker is a string no other process on the machine has in its
// command line, for the host's process table to find.
func wallMarker() string {
	return fmt.Sprintf("%06d", rand.IntN(1_000_000))
}

// wallProcs returns the host's processes whose command line contains
// needle (Linux /proc), as "pid: cmdline".
func wallProcs(t *testing.T, needle string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		if cmd := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cmd, needle) {
			out = append(out, fmt.Sprintf("%d: %s", pid, cmd))
		}
	}
	return out
}

// wallAwaitProcs polls the host's process table until some process
// matches needle, failing with the session's journal if none comes.
func wallAwaitProcs(ctx context.Context, t *testing.T, srv *server, id, needle string) {
	t.Helper()
	deadline := time.Now().Add(wallStopWithin)
	for len(wallProcs(t, needle)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no process running %q came; the journal:\n%s", needle, describeJournal(journal(ctx, t, srv.api, id)))
		}
		time.Sleep(pollInterval)
	}
}

// wallRequireGone polls until no process matches any needle, failing with
// the survivors after timeout.
func wallRequireGone(t *testing.T, timeout time.Duration, needles ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, n := range needles {
			left = append(left, wallProcs(t, n)...)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes survived the deadline by %s: %v", timeout, left)
		}
		time.Sleep(pollInterval)
	}
}

// wallStopped polls until the session's turn has ended, and requires that
// it ended for reason within wallStopWithin of its creation.
func wallStopped(ctx context.Context, t *testing.T, srv *server, s *lt.Session, reason string) *lt.Session {
	t.Helper()
	got := waitTerminal(ctx, t, srv, s.ID, wallStopWithin)
	requireStatus(ctx, t, srv, got, lt.SessionFailed)
	require.Equal(t, reason, deref(got.StopReason))
	return got
}

// wallEvent is what the cases read of tool.failed, model.failed and
// effect.in_doubt events (as documented in docs/api.md).
type wallEvent struct {
	Tool        string          `json:"tool"`
	Error       string          `json:"error"`
	Output      json.RawMessage `json:"output"`
	Interrupted string          `json:"interrupted"`
	Kind        string          `json:"kind"`
	Reason      string          `json:"reason"`
	Retry       bool            `json:"retry"`
}

// wallEvents returns the data of the session's events of type typ.
func wallEvents(ctx context.Context, t *testing.T, srv *server, id, typ string) []wallEvent {
	t.Helper()
	return eventData[wallEvent](ctx, t, srv.api, id, typ)
}

// TestAdversarialWall_LongCommandKilled: `sleep 30` under max_wall_seconds
// 3 is killed at the deadline (gone from the host's process table), the
// call is journaled as interrupted and the session stops with
// budget_exceeded, long before the 30 s.
func TestAdversarialWall_LongCommandKilled(t *testing.T) {
	t.Parallel()
	srv := wallSandboxServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sleep := "sleep 30." + wallMarker()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep("echo started; "+sleep), finalText("never"))},
			Tools: []lt.ToolSpec{{Name: "shell", Effect: lt.EffectIdempotent}},
		},
		Budget: &lt.Budget{MaxWallSeconds: wallDeadline},
		Input:  "Run the command.",
	})
	require.NoError(t, err)
	wallAwaitProcs(ctx, t, srv, s.ID, sleep)
	wallStopped(ctx, t, srv, s, lt.StopBudgetExceeded)
	wallRequireGone(t, 5*time.Second, sleep)

	failed := wallEvents(ctx, t, srv, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "max_wall_seconds", failed[0].Interrupted)
	require.Contains(t, string(failed[0].Output), "started")
	require.Len(t, wallEvents(ctx, t, srv, s.ID, lt.EventBudgetExceeded), 1)
}

// TestAdversarialWall_Grandchild (a short name: the test's temporary
// directory holds the proxy's socket, whose path is bounded): a command forks a
// grandchild that leaves its session and process group (setsid) and one
// double-forked under nohup, each to phone home after the deadline. The
// recorder proves the way out works (a control request before the
// deadline arrives) and that neither grandchild got out; the host shows
// none of them left.
func TestAdversarialWall_Grandchild(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	srv := wallSandboxServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := wallMarker()
	setsidSleep, nohupSleep, mainSleep := "sleep 6.1"+m, "sleep 6.2"+m, "sleep 30.3"+m
	command := proxyCurl(5, rec.url()+"/control") + "; " +
		`setsid sh -c '` + setsidSleep + `; ` + proxyCurl(5, rec.url()+"/escape-setsid") + `' </dev/null >/dev/null 2>&1 & ` +
		`nohup sh -c '(` + nohupSleep + `; ` + proxyCurl(5, rec.url()+"/escape-nohup") + `) &' </dev/null >/dev/null 2>&1 & ` +
		mainSleep
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:       lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep(command), finalText("never"))},
			Tools:       []lt.ToolSpec{{Name: "shell", Effect: lt.EffectIdempotent}},
			Environment: rec.network(),
		},
		Budget: &lt.Budget{MaxWallSeconds: wallDeadline},
		Input:  "Run the command.",
	})
	require.NoError(t, err)
	wallAwaitProcs(ctx, t, srv, s.ID, setsidSleep)
	wallStopped(ctx, t, srv, s, lt.StopBudgetExceeded)
	wallRequireGone(t, 5*time.Second, m)
	// Nothing of the command runs any more: nothing can send later.
	require.Equal(t, 1, rec.count("/control"), "the way to the recorder works: %v", rec.all())
	require.Zero(t, rec.count("/escape-setsid"), "a detached grandchild outlived the kill")
	require.Zero(t, rec.count("/escape-nohup"), "a double-forked grandchild outlived the kill")
}

// TestAdversarialWall_IgnoredSignalsStillDie: a command that ignores
// SIGTERM, SIGINT and SIGHUP, and a child of it doing the same in a busy
// loop, die at the deadline all the same.
func TestAdversarialWall_IgnoredSignalsStillDie(t *testing.T) {
	t.Parallel()
	srv := wallSandboxServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := wallMarker()
	command := `trap '' TERM INT HUP; sh -c 'trap "" TERM INT HUP; while :; do :; done' spin-` + m + ` & sleep 30.` + m
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep(command), finalText("never"))},
			Tools: []lt.ToolSpec{{Name: "shell", Effect: lt.EffectIdempotent}},
		},
		Budget: &lt.Budget{MaxWallSeconds: wallDeadline},
		Input:  "Run the command.",
	})
	require.NoError(t, err)
	wallAwaitProcs(ctx, t, srv, s.ID, "spin-"+m)
	wallStopped(ctx, t, srv, s, lt.StopBudgetExceeded)
	wallRequireGone(t, 5*time.Second, m)
}

// TestAdversarialWall_ManyBackgroundChildren: a command that scatters
// twenty orphaned background sleeps (each in a subshell that exits at
// once) loses them all at the deadline, under turn_timeout_seconds.
func TestAdversarialWall_ManyBackgroundChildren(t *testing.T) {
	t.Parallel()
	srv := wallSandboxServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := wallMarker()
	command := `for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do (sleep 40.` + m + ` &); done; sleep 30.` + m
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:              lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep(command), finalText("never"))},
			Tools:              []lt.ToolSpec{{Name: "shell", Effect: lt.EffectIdempotent}},
			TurnTimeoutSeconds: wallDeadline,
		},
		Input: "Run the command.",
	})
	require.NoError(t, err)
	wallAwaitProcs(ctx, t, srv, s.ID, "sleep 30."+m)
	wallStopped(ctx, t, srv, s, lt.StopTimeout)
	wallRequireGone(t, 5*time.Second, m)
	failed := wallEvents(ctx, t, srv, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "turn_timeout", failed[0].Interrupted)
}

// TestAdversarialWall_InDoubt: an irreversible command
// (the shell's default class) that already reached the outside when the
// deadline cut it is in doubt: an in_doubt action says why, and when a
// person answers did_not_happen it is not run again past the deadline
// (the recorder got exactly one request) and the session stops.
func TestAdversarialWall_InDoubt(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	srv := wallSandboxServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sleep := "sleep 30." + wallMarker()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:       lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep(proxyCurl(5, rec.url()+"/deploy")+"; "+sleep), finalText("never"))},
			Tools:       []lt.ToolSpec{{Name: "shell"}},
			Environment: rec.network(),
		},
		Budget: &lt.Budget{MaxWallSeconds: wallDeadline},
		Input:  "Deploy.",
	})
	require.NoError(t, err)
	wallAwaitProcs(ctx, t, srv, s.ID, sleep)
	got := waitStatus(ctx, t, srv, s.ID, wallStopWithin, lt.SessionRequiresAction) // the in_doubt action
	wallRequireGone(t, 5*time.Second, sleep)
	require.Len(t, got.RequiredActions, 1)
	act := got.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Contains(t, act.Summary, "interrupted in flight: the session's wall-clock budget ran out")
	doubt := wallEvents(ctx, t, srv, s.ID, lt.EventEffectInDoubt)
	require.Len(t, doubt, 1)
	require.Empty(t, wallEvents(ctx, t, srv, s.ID, lt.EventToolFailed), "cut midway, it is not a plain failure")
	effects, err := srv.api.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, effects.Data, 1)
	require.Equal(t, lt.EffectInDoubt, effects.Data[0].Status)

	_, err = srv.api.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	wallStopped(ctx, t, srv, s, lt.StopBudgetExceeded)
	require.Equal(t, 1, rec.count("/deploy"), "the irreversible call ran again past the deadline: %v", rec.all())
	require.Len(t, wallEvents(ctx, t, srv, s.ID, lt.EventToolStarted), 1)
}

// wallSleeper creates a session whose model asks the sleep tool for 60 s
// under max_wall_seconds wallDeadline.
func wallSleeper(ctx context.Context, t *testing.T, srv *server) *lt.Session {
	t.Helper()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				toolCalls(toolCall("sleep", map[string]any{"seconds": 60})),
				finalText("never"))},
			Tools: []lt.ToolSpec{{Name: "sleep"}},
		},
		Budget: &lt.Budget{MaxWallSeconds: wallDeadline},
		Input:  "Wait a minute.",
	})
	require.NoError(t, err)
	return s
}

// TestAdversarialWall_SleepToolEndsAtDeadline: the sleep tool asking for
// 60 s under max_wall_seconds 3 parks the session (a row, no worker) and
// it is woken and stopped at the deadline.
func TestAdversarialWall_SleepToolEndsAtDeadline(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := wallSleeper(ctx, t, srv)
	got := wallStopped(ctx, t, srv, s, lt.StopBudgetExceeded)
	require.Less(t, got.UpdatedAt.Sub(got.CreatedAt), 30*time.Second, "stopped at the deadline, not at the end of the sleep")
	var waited bool
	for _, ev := range journal(ctx, t, srv.api, s.ID) {
		if ev.Type == lt.EventSessionStatusChanged && strings.Contains(string(ev.Data), `"to":"waiting"`) {
			waited = true
		}
	}
	require.True(t, waited, "the session was parked while it slept")
	failed := wallEvents(ctx, t, srv, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "sleep", failed[0].Tool)
	require.Equal(t, "max_wall_seconds", failed[0].Interrupted)
	require.Empty(t, wallEvents(ctx, t, srv, s.ID, lt.EventToolCompleted))
}

// TestAdversarialWall_SignalWaitEndsAtTurnTimeout: wait_for_signal with
// a day's timeout under turn_timeout_seconds 3 ends at the turn's deadline.
func TestAdversarialWall_SignalWaitEndsAtTurnTimeout(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				toolCalls(toolCall("wait_for_signal", map[string]any{"name": "never.comes", "timeout_seconds": 86400})),
				finalText("never"))},
			Tools:              []lt.ToolSpec{{Name: "wait_for_signal"}},
			TurnTimeoutSeconds: wallDeadline,
		},
		Input: "Wait for the signal.",
	})
	require.NoError(t, err)
	wallStopped(ctx, t, srv, s, lt.StopTimeout)
	failed := wallEvents(ctx, t, srv, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "turn_timeout", failed[0].Interrupted)
}

// TestAdversarialWall_SlowModelAbandoned: a model that takes 60 s to
// answer is abandoned at turn_timeout_seconds 3; the call is journaled as
// interrupted and still counted in the usage.
func TestAdversarialWall_SlowModelAbandoned(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:              lt.ModelSpec{Provider: "scripted", Script: attackScript(t, map[string]any{"delay_ms": 60000, "text": "too late"})},
			TurnTimeoutSeconds: wallDeadline,
		},
		Input: "Think hard.",
	})
	require.NoError(t, err)
	got := wallStopped(ctx, t, srv, s, lt.StopTimeout)
	failed := wallEvents(ctx, t, srv, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "timeout", failed[0].Kind)
	require.Equal(t, "turn_timeout", failed[0].Interrupted)
	require.Empty(t, wallEvents(ctx, t, srv, s.ID, lt.EventModelResponded))
	require.Equal(t, int64(1), got.Usage.ModelCalls)
	require.Positive(t, got.Usage.InputTokens, "the abandoned call's input is counted")
}

// TestAdversarialWall_WakesAfterRestart: the deadline of a parked wait is
// a wake time of the session's row, not a timer in a process: a server
// killed while the session sleeps (60 s under max_wall_seconds 3) and
// started again still stops it at the deadline.
func TestAdversarialWall_WakesAfterRestart(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := wallSleeper(ctx, t, srv)
	var got *lt.Session
	waitFor(t, wallStopWithin, "the session to sleep", func() (bool, error) {
		var err error
		got, err = srv.api.GetSession(ctx, s.ID)
		if err == nil && got.Status.Terminal() {
			return false, fmt.Errorf("the session ended before it slept: %s", deref(got.StopReason))
		}
		return err == nil && got.Status == lt.SessionWaiting, err
	})
	srv.restart()
	got = wallStopped(ctx, t, srv, s, lt.StopBudgetExceeded)
	require.Less(t, got.UpdatedAt.Sub(got.CreatedAt), 30*time.Second, "stopped at the deadline, not at the end of the sleep")
	failed := wallEvents(ctx, t, srv, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "max_wall_seconds", failed[0].Interrupted)
}

// TestAdversarialWall_MCPCallCancelled: a tool of an MCP server (the
// reference "everything" server's long-running operation, asked for 60 s)
// is cancelled at turn_timeout_seconds 8 (the server, a Node.js program,
// must start and list its tools first); the call is journaled as
// interrupted and the turn stops. The server runs as a local subprocess:
// its program lives outside what a bubblewrap sandbox mounts.
func TestAdversarialWall_MCPCallCancelled(t *testing.T) {
	t.Parallel()
	bin := mcpEverything(t)
	srv := startServer(t, "--sandbox", "local")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				toolCalls(toolCall("everything__trigger-long-running-operation", map[string]any{"duration": 60, "steps": 60})),
				finalText("never"))},
			Tools:              []lt.ToolSpec{{Name: "everything", Type: "mcp", Command: bin, Args: []string{"stdio"}, TrustAnnotations: true}},
			TurnTimeoutSeconds: 8,
		},
		Input: "Run the long operation.",
	})
	require.NoError(t, err)
	wallStopped(ctx, t, srv, s, lt.StopTimeout)
	failed := wallEvents(ctx, t, srv, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1, "%s", describeJournal(journal(ctx, t, srv.api, s.ID)))
	require.Equal(t, "everything__trigger-long-running-operation", failed[0].Tool)
	require.Equal(t, "turn_timeout", failed[0].Interrupted)
	require.Empty(t, wallEvents(ctx, t, srv, s.ID, lt.EventToolCompleted))
}
