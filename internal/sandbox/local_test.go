//go:build unix

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// processGone reports whether pid no longer runs (a zombie runs nothing).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

func TestLocalRunsInWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	ex := NewLocal().Exec(Spec{SessionID: "ses_a", Workspace: ws})
	require.Equal(t, "local", NewLocal().Name())
	res := run(t, ex, "pwd; echo written > out.txt")
	require.Equal(t, &tool.ExecResult{Stdout: ws + "\n"}, res)
	got, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	require.NoError(t, err)
	require.Equal(t, "written\n", string(got))

	res = run(t, ex, "echo err >&2; exit 4")
	require.Equal(t, &tool.ExecResult{ExitCode: 4, Stderr: "err\n"}, res)
	res = run(t, ex, "kill -TERM $$")
	require.Equal(t, &tool.ExecResult{ExitCode: -1, Signal: "terminated"}, res)
}

// Not parallel: it sets an environment variable of the test process.
func TestLocalEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("LONGHAUL_SANDBOX_TEST_CANARY", "server-secret")
	ws := t.TempDir()
	res := run(t, NewLocal().Exec(Spec{Workspace: ws}), "env", func(r *tool.ExecRequest) {
		r.Env = map[string]string{"LONGHAUL_IDEMPOTENCY_KEY": "idem_1"}
	})
	require.NotContains(t, res.Stdout, "server-secret")
	env := map[string]string{}
	for line := range strings.Lines(res.Stdout) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		require.True(t, ok, line)
		env[k] = v
	}
	delete(env, "OLDPWD") // what a shell may add by itself
	delete(env, "SHLVL")
	delete(env, "_")
	require.Equal(t, map[string]string{
		"PATH": DefaultPath, "HOME": ws, "PWD": ws, "TMPDIR": filepath.Join(ws, ".tmp"), "LANG": "C.UTF-8",
		"LONGHAUL_IDEMPOTENCY_KEY": "idem_1",
	}, env)
	require.DirExists(t, filepath.Join(ws, ".tmp"))
}

func TestLocalTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	ex := NewLocal().Exec(Spec{Workspace: t.TempDir()})
	start := time.Now()
	// A second is ample for the shell to print the pid before it is killed.
	res := run(t, ex, "sleep 100 & echo $!; sleep 100", withTimeout(time.Second))
	require.Less(t, time.Since(start), 3*time.Second)
	require.True(t, res.TimedOut)
	require.Equal(t, LimitWall, res.Limit)
	require.Equal(t, "killed", res.Signal)
	require.Equal(t, -1, res.ExitCode)
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	require.NoError(t, err)
	waitFor(t, "the background process to die", func() bool { return processGone(pid) })
}

func TestLocalOutputLimits(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()

	// The captured text keeps its head and tail.
	res := run(t, NewLocal().Exec(Spec{Workspace: ws}),
		`printf HEAD; head -c 100000 /dev/zero | tr '\0' x; printf TAIL`,
		func(r *tool.ExecRequest) { r.MaxOutputBytes = 1000 })
	require.True(t, res.Truncated)
	require.Empty(t, res.Limit)
	head, tail, ok := strings.Cut(res.Stdout, "\n[... 99008 bytes truncated ...]\n")
	require.True(t, ok, res.Stdout)
	require.Equal(t, "HEAD"+strings.Repeat("x", 496), head)
	require.Equal(t, strings.Repeat("x", 496)+"TAIL", tail)

	// Past OutputBytes the program is killed.
	start := time.Now()
	res = run(t, NewLocal().Exec(Spec{Workspace: ws, Limits: Limits{OutputBytes: 50_000}}), "yes")
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, LimitOutput, res.Limit)
	require.True(t, res.Truncated)
	require.False(t, res.TimedOut)
	require.Equal(t, "killed", res.Signal)
}

func TestLocalCPULimit(t *testing.T) {
	t.Parallel()
	res := run(t, NewLocal().Exec(Spec{Workspace: t.TempDir(), Limits: Limits{CPUSeconds: 1}}), "while :; do :; done")
	require.Equal(t, LimitCPU, res.Limit)
	require.Equal(t, "CPU time limit exceeded", res.Signal)
}

func TestLocalErrors(t *testing.T) {
	t.Parallel()
	_, err := NewLocal().Exec(Spec{Workspace: filepath.Join(t.TempDir(), "gone")}).Run(t.Context(), &tool.ExecRequest{Command: "true"})
	require.ErrorContains(t, err, "workspace")
	_, err = NewLocal().Exec(Spec{Workspace: t.TempDir()}).Run(t.Context(), &tool.ExecRequest{Command: "true", Timeout: -1})
	require.ErrorContains(t, err, "request.timeout")

	ctx, cancel := contextWithCancel(t)
	cancel()
	ws := t.TempDir()
	_, err = NewLocal().Exec(Spec{Workspace: ws}).Run(ctx, &tool.ExecRequest{Command: "touch ran"})
	require.ErrorIs(t, err, contextCanceled)
	require.NoFileExists(t, filepath.Join(ws, "ran"))
}

// TestLocalCommandLeavesNothingBehind: when a local command ends, what it
// started goes with it, even a process that left its process group and
// session (setsid), which the kill of the group misses: the command runs
// under a reaper (ReapCommand) that kills every process under it. The
// command's exit code is still its own.
func TestLocalCommandLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	if reaperPath() == "" {
		t.Skip("no reaper on this system")
	}
	ex := NewLocal().Exec(Spec{Workspace: t.TempDir()})
	res := run(t, ex, `setsid sh -c 'exec sleep 100' </dev/null >/dev/null 2>&1 & echo $!; exit 7`)
	require.Equal(t, 7, res.ExitCode)
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	require.NoError(t, err)
	waitFor(t, "the detached process to die", func() bool { return processGone(pid) })
}

// TestLocalCancelEndsTrappingCommand: a cancelled command that traps
// SIGTERM and SIGINT is gone with everything it started, and the run
// says it was killed.
func TestLocalCancelEndsTrappingCommand(t *testing.T) {
	t.Parallel()
	ex := NewLocal().Exec(Spec{Workspace: t.TempDir()})
	ctx, cancel := context.WithCancel(t.Context())
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	done := make(chan *tool.ExecResult, 1)
	go func() {
		res, err := ex.Run(ctx, &tool.ExecRequest{Command: `trap '' TERM INT HUP; sleep 100 & echo $! > ` + pidFile + `; wait`, Timeout: time.Minute})
		require.NoError(t, err)
		done <- res
	}()
	waitFor(t, "the pid file", func() bool { b, err := os.ReadFile(pidFile); return err == nil && len(b) > 1 })
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	cancel()
	res := <-done
	require.Equal(t, "killed", res.Signal)
	waitFor(t, "the background process to die", func() bool { return processGone(pid) })
}

// BenchmarkLocalRun is the cost of one local command (`true`), the reaper
// included: the latency a shell call adds with the plain sandbox.
func BenchmarkLocalRun(b *testing.B) {
	ex := NewLocal().Exec(Spec{Workspace: b.TempDir()})
	for b.Loop() {
		res, err := ex.Run(b.Context(), &tool.ExecRequest{Command: "true", Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
}
