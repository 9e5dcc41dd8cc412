//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOrphanedStoppedReaperIsWoken: a command that stops its own reaper
// (SIGSTOP, same user) keeps it from acting on its parent-death signal when
// the server dies; the next local backend made (a restarted server or
// runner) wakes it, and it kills what the command left.
func TestOrphanedStoppedReaperIsWoken(t *testing.T) {
	if reaperPath() == "" {
		t.Skip("no reaper on this system")
	}
	// The shell below runs the reaper: it needs this binary's own path
	// (its /proc/self/exe is the shell).
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "sleep.pid")
	// The stand-in server is a shell: the reaper's parent, killed below.
	inner := `sleep 100 & echo $! > ` + pidFile + `; kill -STOP $PPID; wait`
	server := exec.Command("/bin/sh", "-c", `"$0" `+ReapCommand+` $$ 0 -- /bin/sh -c "$1" & wait`, exe, inner)
	require.NoError(t, server.Start())
	var sleepPid int
	waitFor(t, "the command's background process and its stopped reaper", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		sleepPid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return false
		}
		reaper := parentPid(sleepPid) // the command ended? then the sleep is the reaper's
		for reaper > 1 && !strings.Contains(strings.Join(cmdline(reaper), " "), ReapCommand) {
			reaper = parentPid(reaper)
		}
		return reaper > 1 && strings.HasPrefix(statusField(reaper, "State"), "T")
	})
	require.NoError(t, server.Process.Kill())
	_ = server.Wait()
	require.False(t, processGone(sleepPid), "a stopped reaper kills nothing")

	require.GreaterOrEqual(t, wakeOrphanedReapers(), 1)
	waitFor(t, "the command's background process to die", func() bool { return processGone(sleepPid) })
}

// TestReaperRunsFromAReplacedBinary: the reaper is this process's own
// binary, even once its file is gone (an upgrade replaced or removed it
// while the server ran): commands still run, under a reaper of this
// version. A copy of the test binary removes itself, then runs a command.
func TestReaperRunsFromAReplacedBinary(t *testing.T) {
	if os.Getenv("LONGHAUL_TEST_REAPER_SELF_REMOVED") == "1" {
		exe, err := os.Executable()
		require.NoError(t, err)
		require.NoError(t, os.Remove(exe))
		res := run(t, NewLocal().Exec(Spec{Workspace: t.TempDir()}), `echo ran`)
		require.Equal(t, 0, res.ExitCode, res.Stderr)
		require.Equal(t, "ran\n", res.Stdout)
		return
	}
	if reaperPath() == "" {
		t.Skip("no reaper on this system")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	cp := filepath.Join(t.TempDir(), "sandbox.test")
	require.NoError(t, os.WriteFile(cp, data, 0o755))
	cmd := exec.Command(cp, "-test.run=^TestReaperRunsFromAReplacedBinary$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LONGHAUL_TEST_REAPER_SELF_REMOVED=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestReaperRunsFromAReplacedBinary")
	_, err = os.Stat(cp)
	require.ErrorIs(t, err, os.ErrNotExist, "the copy removed itself before running the command")
}

// TestReapersCommandBeforeItsExecIsNoOrphan: between the reaper's fork of
// its command and the command's exec, the child shows the reaper's own
// arguments under the reaper as parent. Another server's first local
// backend, waking orphaned reapers then, took it for one and sent it
// SIGTERM: the command died before it started, and its server read a
// sandbox failure ("local exec: exit status -1", seen in the crash tests
// under load). Only a reaper whose parent is neither the server it names
// nor a copy of itself is an orphan.
func TestReapersCommandBeforeItsExecIsNoOrphan(t *testing.T) {
	reaper := []string{"/proc/self/exe", ReapCommand, "4242", "1", "--", "/bin/sh", "-c", "true"}
	require.False(t, orphanedReaper(reaper, 4242, []string{"longhaul", "serve"}), "its server is alive")
	require.False(t, orphanedReaper(reaper, 5151, reaper), "a reaper's command before its exec")
	require.True(t, orphanedReaper(reaper, 1, nil), "its server died: given to init")
	require.True(t, orphanedReaper(reaper, 777, []string{"/sbin/init-like-subreaper"}), "its server died: given to a subreaper")
	other := slices.Clone(reaper)
	other[2] = "999"
	require.True(t, orphanedReaper(reaper, 5151, other), "under another server's reaper, it is still an orphan")
	require.False(t, orphanedReaper([]string{"x", ReapCommand, "not-a-pid"}, 1, nil), "unreadable arguments are left alone")
	require.False(t, orphanedReaper(reaper, 0, nil), "a process gone before its parent was read is left alone")
}
