//go:build linux

package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReapOrphans(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	// A sandbox of this package's shape whose outer bwrap dies, as when the
	// server dies while bwrap sets one up; without --die-with-parent its
	// pid 1 lives on.
	args := []string{"--unshare-all", "--unshare-user", "--hostname", hostname, "--ro-bind", "/usr", "/usr"}
	for _, d := range systemDirs {
		if target, err := os.Readlink(d); err == nil {
			args = append(args, "--symlink", target, d)
		} else if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			args = append(args, "--ro-bind", d, d)
		}
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", WorkspaceDir, "--chdir", WorkspaceDir,
		"--", "/bin/sh", "-c", "echo started; exec sleep 60")
	cmd := exec.Command(b.path, args...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "started\n", line)

	kids, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
	require.NoError(t, err)
	fields := strings.Fields(string(kids))
	require.Len(t, fields, 1, "the outer bwrap has one child, the sandbox's pid 1")
	child, err := strconv.Atoi(fields[0])
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.False(t, processGone(child), "the sandbox outlived its outer bwrap")

	require.GreaterOrEqual(t, reapOrphans(), 1)
	waitFor(t, "the orphaned sandbox to die", func() bool { return processGone(child) })
}

func TestRemoveStaleCgroups(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	if b.cgroup == "" {
		t.Skipf("skipping: no pids cgroup here (%v)", b.cgroupErr)
	}
	// pid_max is at most 4194304: no process has this pid.
	stale := filepath.Join(b.cgroup, cgroupPrefix+"999999999-test")
	require.NoError(t, os.Mkdir(stale, 0o755))
	live, err := newRunCgroup(b.cgroup, 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = live.remove(); _ = os.Remove(stale) })

	removeStaleCgroups(b.cgroup)
	require.NoDirExists(t, stale)
	require.DirExists(t, live.dir, "a live server's cgroup stays")
}
