//go:build linux

package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

func shellCall(t *testing.T, ws string, args map[string]any) *tool.Call {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	return &tool.Call{SessionID: "ses_test", Workspace: ws, Arguments: raw, IdempotencyKey: "idem_test_1"}
}

func runShell(t *testing.T, ctx context.Context, call *tool.Call) (*tool.Result, *tool.ShellOutput) {
	t.Helper()
	res, err := (&tool.Shell{}).Run(ctx, call)
	require.NoError(t, err)
	out, _ := res.Output.(*tool.ShellOutput)
	return res, out
}

// processGone reports whether pid no longer runs. A killed process whose
// parent died waits as a zombie until init reaps it; it runs nothing, so it
// counts as gone.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Format: pid (comm) state ...; comm may hold spaces, so split after
	// the last ')'.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

func requireGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline, not waiting blind
	}
}

func pidFrom(t *testing.T, s string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	require.NoError(t, err, "pid in %q", s)
	return pid
}

func TestShellExitCodeAndStreams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		code    int
		stdout  string
		stderr  string
		signal  string
	}{
		{"success", "echo hello", 0, "hello\n", "", ""},
		{"non-zero exit is output", "echo out; echo err >&2; exit 3", 3, "out\n", "err\n", ""},
		{"command not found", "no-such-command-xyz", 127, "", "no-such-command-xyz: not found", ""},
		{"killed by a signal", "kill -TERM $$", -1, "", "", "terminated"},
		{"runs in the workspace", "pwd; ls", 0, "", "", ""},
		{"stdin is empty", "cat; echo done", 0, "done\n", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(ws, "marker.txt"), nil, 0o644))
			res, out := runShell(t, t.Context(), shellCall(t, ws, map[string]any{"command": tc.command}))
			require.Empty(t, res.Error)
			require.NotNil(t, out)
			require.Equal(t, tc.code, out.ExitCode)
			require.Equal(t, tc.signal, out.Signal)
			require.False(t, out.TimedOut)
			require.False(t, out.Truncated)
			if tc.name == "runs in the workspace" {
				require.Equal(t, ws+"\nmarker.txt\n", out.Stdout)
				return
			}
			require.Equal(t, tc.stdout, out.Stdout)
			require.Contains(t, out.Stderr, tc.stderr)
		})
	}
}

func TestShellOutputJSON(t *testing.T) {
	t.Parallel()
	res, _ := runShell(t, t.Context(), shellCall(t, t.TempDir(), map[string]any{"command": "echo hi; exit 2"}))
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.JSONEq(t, `{"output":{"exit_code":2,"stdout":"hi\n","stderr":"","truncated":false,"timed_out":false}}`, string(b))
}

// Not parallel: it sets an environment variable of the test process.
func TestShellEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("LONGHAUL_TEST_CANARY", "server-secret")
	ws := t.TempDir()
	res, out := runShell(t, t.Context(), shellCall(t, ws, map[string]any{"command": "env"}))
	require.Empty(t, res.Error)
	require.NotContains(t, out.Stdout, "server-secret")
	require.NotContains(t, out.Stdout, "LONGHAUL_TEST_CANARY")

	env := map[string]string{}
	for line := range strings.Lines(out.Stdout) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		require.True(t, ok, line)
		env[k] = v
	}
	require.Equal(t, "ses_test", env["LONGHAUL_SESSION_ID"])
	require.Equal(t, "idem_test_1", env["LONGHAUL_IDEMPOTENCY_KEY"])
	require.Equal(t, ws, env["HOME"])
	require.Equal(t, filepath.Join(ws, ".tmp"), env["TMPDIR"])
	require.DirExists(t, env["TMPDIR"])
	require.Equal(t, "C.UTF-8", env["LANG"])
	require.Equal(t, tool.DefaultShellPath, env["PATH"])
	allowed := map[string]bool{"PATH": true, "HOME": true, "PWD": true, "TMPDIR": true, "LANG": true,
		"LONGHAUL_SESSION_ID": true, "LONGHAUL_IDEMPOTENCY_KEY": true,
		// What a shell may add by itself.
		"OLDPWD": true, "SHLVL": true, "_": true}
	for k := range env {
		require.True(t, allowed[k], "unexpected variable %s reached the command", k)
	}
}

func TestShellTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	call := shellCall(t, ws, map[string]any{"command": "sleep 100 & echo $!; echo partial >&2; sleep 100"})
	call.Timeout = 300 * time.Millisecond
	start := time.Now()
	res, out := runShell(t, t.Context(), call)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, "command timed out after 0.3s", res.Error)
	require.NotNil(t, out, "partial output is kept")
	require.True(t, out.TimedOut)
	require.Equal(t, -1, out.ExitCode)
	require.Equal(t, "killed", out.Signal)
	require.Equal(t, "partial\n", out.Stderr)
	requireGone(t, pidFrom(t, out.Stdout))
}

func TestShellKillsBackgroundProcessesWhenDone(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	start := time.Now()
	res, out := runShell(t, t.Context(), shellCall(t, ws, map[string]any{"command": "sleep 100 & echo $!"}))
	require.Empty(t, res.Error)
	require.Equal(t, 0, out.ExitCode)
	// The grandchild held the output pipe; killing the group released it
	// at once rather than after the grace period.
	require.Less(t, time.Since(start), 1500*time.Millisecond)
	requireGone(t, pidFrom(t, out.Stdout))
}

func TestShellContextCancelKills(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	call := shellCall(t, ws, map[string]any{"command": "sleep 100 & echo $! > child.pid; wait"})

	type result struct {
		res *tool.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := (&tool.Shell{}).Run(ctx, call)
		done <- result{res, err}
	}()
	var pid int
	deadline := time.Now().Add(2 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(ws, "child.pid"))
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid = pidFrom(t, string(b))
			break
		}
		require.False(t, time.Now().After(deadline), "command did not start")
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, "command cancelled: context canceled", r.res.Error)
	out := r.res.Output.(*tool.ShellOutput)
	require.False(t, out.TimedOut)
	requireGone(t, pid)
}

func TestShellCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := (&tool.Shell{}).Run(ctx, shellCall(t, t.TempDir(), map[string]any{"command": "touch ran"}))
	require.ErrorIs(t, err, context.Canceled)
}

func TestShellOutputTruncationKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	call := shellCall(t, t.TempDir(), map[string]any{
		"command": `printf HEAD; head -c 100000 /dev/zero | tr '\0' x; printf TAIL; printf small >&2`,
	})
	call.MaxOutputBytes = 1000
	res, out := runShell(t, t.Context(), call)
	require.Empty(t, res.Error)
	require.True(t, out.Truncated)
	require.True(t, strings.HasPrefix(out.Stdout, "HEADxxx"))
	require.True(t, strings.HasSuffix(out.Stdout, "xxxTAIL"))
	require.Contains(t, out.Stdout, "\n[... 99008 bytes truncated ...]\n")
	head, tail, _ := strings.Cut(out.Stdout, "\n[... 99008 bytes truncated ...]\n")
	require.Len(t, head, 500)
	require.Len(t, tail, 500)
	require.Equal(t, "small", out.Stderr)
}

func TestShellArgumentValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args string
		want string
	}{
		{"timeout above max", `{"command":"true","timeout_seconds":601}`, "arguments.timeout_seconds: must be <= 600"},
		{"timeout zero", `{"command":"true","timeout_seconds":0}`, "arguments.timeout_seconds: must be >= 1"},
		{"timeout not integer", `{"command":"true","timeout_seconds":"5"}`, "arguments.timeout_seconds: must be integer, got string"},
		{"missing command", `{}`, "arguments.command: is required"},
		{"empty command", `{"command":""}`, "arguments.command: must be at least 1 characters long"},
		{"NUL in command", `{"command":"echo a\u0000b"}`, "arguments.command: must not contain a NUL byte"},
		{"unknown field", `{"command":"true","cwd":"/"}`, "arguments.cwd: is not an allowed field"},
		{"not JSON", `{"command":`, "arguments: not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			call := &tool.Call{SessionID: "ses_test", Workspace: ws, Arguments: json.RawMessage(tc.args)}
			res, err := (&tool.Shell{}).Run(t.Context(), call)
			require.NoError(t, err)
			require.Nil(t, res.Output)
			require.Contains(t, res.Error, tc.want)
			entries, err := os.ReadDir(ws)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing ran")
		})
	}
}

func TestShellTimeoutArgumentWins(t *testing.T) {
	t.Parallel()
	// timeout_seconds 1 beats the call's long default: the command is
	// killed after one second, not ten.
	call := shellCall(t, t.TempDir(), map[string]any{"command": "sleep 100", "timeout_seconds": 1.0})
	call.Timeout = 10 * time.Second
	res, out := runShell(t, t.Context(), call)
	require.Equal(t, "command timed out after 1s", res.Error)
	require.True(t, out.TimedOut)
}

func TestShellWorkspaceMissingIsGoError(t *testing.T) {
	t.Parallel()
	_, err := (&tool.Shell{}).Run(t.Context(), shellCall(t, filepath.Join(t.TempDir(), "gone"), map[string]any{"command": "true"}))
	require.Error(t, err)
}

// TestShellHelperProcess is not a test: TestShellDiesWithServer runs the
// test binary with it as a stand-in server that starts a shell command and
// is then killed.
func TestShellHelperProcess(t *testing.T) {
	ws := os.Getenv("LONGHAUL_TOOL_TEST_HELPER_WS")
	if ws == "" {
		t.Skip("helper process only")
	}
	_, _ = (&tool.Shell{}).Run(context.Background(), shellCall(t, ws, map[string]any{"command": "echo $$ > sh.pid; sleep 100; echo unreachable"}))
	t.Fatal("the shell should have outlived the helper's wait")
}

func TestShellDiesWithServer(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestShellHelperProcess$")
	helper.Env = append(os.Environ(), "LONGHAUL_TOOL_TEST_HELPER_WS="+ws)
	require.NoError(t, helper.Start())
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		_ = helper.Wait()
	})

	var shPid int
	deadline := time.Now().Add(2 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(ws, "sh.pid"))
		if err == nil && strings.HasSuffix(string(b), "\n") {
			shPid = pidFrom(t, string(b))
			break
		}
		require.False(t, time.Now().After(deadline), "helper did not start the command")
		time.Sleep(5 * time.Millisecond)
	}
	// The shell's own children are not covered by the parent-death signal;
	// clean them up whatever happens.
	t.Cleanup(func() { _ = syscall.Kill(-shPid, syscall.SIGKILL) })

	require.NoError(t, helper.Process.Signal(syscall.SIGKILL))
	_ = helper.Wait()
	requireGone(t, shPid)
}
