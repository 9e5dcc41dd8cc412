//go:build linux

package sandbox

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// runPlainShell runs command with the shell tool as an engine without a
// sandbox does (no Exec: a plain subprocess of the workspace).
func runPlainShell(t *testing.T, ws, command string) *tool.ShellOutput {
	t.Helper()
	args, err := json.Marshal(map[string]string{"command": command})
	require.NoError(t, err)
	res, err := (&tool.Shell{}).Run(t.Context(), &tool.Call{Workspace: ws, Arguments: args})
	require.NoError(t, err)
	out, ok := res.Output.(*tool.ShellOutput)
	require.True(t, ok, "%#v", res)
	return out
}

// TestPlainShellCommandLeavesNothingBehind: the shell tool's plain
// commands (no sandbox at all: tests, embedding) run under the reaper
// when this binary has it (it links this package): a process the command
// started that left its process group and session (setsid), which the
// kill of the group misses, dies when the command ends. The exit code is
// still the command's.
func TestPlainShellCommandLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	if reaperPath() == "" {
		t.Skip("no reaper on this system")
	}
	// The command waits for the daemon to be on its own (its pid file
	// written after setsid), so that the kill of the group cannot catch it.
	out := runPlainShell(t, t.TempDir(), `setsid sh -c 'echo $$ > d.pid; exec sleep 100' </dev/null >/dev/null 2>&1 &
while [ ! -s d.pid ]; do sleep 0.01; done; cat d.pid; exit 7`)
	require.Equal(t, 7, out.ExitCode)
	pid, err := strconv.Atoi(strings.TrimSpace(out.Stdout))
	require.NoError(t, err)
	waitFor(t, "the detached process to die", func() bool { return processGone(pid) })
}

// TestPlainShellCommandDiesWithTheServer: a stand-in server (this test
// binary again) runs a plain shell command that starts a setsid daemon,
// and is killed with SIGKILL mid-command. The daemon dies with it; before,
// only the shell did (its parent-death signal) and the daemon lived on.
func TestPlainShellCommandDiesWithTheServer(t *testing.T) {
	if pidFile := os.Getenv("LONGHAUL_TEST_PLAIN_SHELL_PIDFILE"); pidFile != "" {
		// The workspace is the parent's: this process is killed, and a
		// t.TempDir of its own would be left behind in $TMPDIR.
		runPlainShell(t, os.Getenv("LONGHAUL_TEST_PLAIN_SHELL_DIR"), `setsid sh -c 'echo $$ > `+pidFile+`; exec sleep 100' </dev/null >/dev/null 2>&1 & sleep 100`)
		return
	}
	t.Parallel()
	if reaperPath() == "" {
		t.Skip("no reaper on this system")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	pidFile := filepath.Join(t.TempDir(), "daemon.pid")
	server := exec.Command(exe, "-test.run=^TestPlainShellCommandDiesWithTheServer$", "-test.count=1")
	server.Env = append(os.Environ(), "LONGHAUL_TEST_PLAIN_SHELL_PIDFILE="+pidFile, "LONGHAUL_TEST_PLAIN_SHELL_DIR="+t.TempDir())
	require.NoError(t, server.Start())
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	var pid int
	waitFor(t, "the daemon's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	t.Cleanup(func() {
		if !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // not to leave it behind when the test fails
		}
	})
	require.NoError(t, server.Process.Kill())
	_ = server.Wait()
	waitFor(t, "the daemon to die with the server", func() bool { return processGone(pid) })
}
