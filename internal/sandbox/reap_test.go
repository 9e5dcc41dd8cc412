//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
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
	exe := reaperPath()
	if exe == "" {
		t.Skip("no reaper on this system")
	}
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
