package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestKilledRunnerLeavesNoCommandRunning: a runner killed with SIGKILL
// leaves none of its commands' processes running, with either sandbox: not
// the command, nor a background grandchild it started, nor one that left
// its process group and session (setsid). The same for the server's own
// node with the plain sandbox. The command records the host pids of its
// processes (with the plain sandbox, which shares the host's pid
// namespace) and each sleeps with a duration of its own, found in /proc
// by its command line (bwrap's pids are its namespace's).
func TestKilledRunnerLeavesNoCommandRunning(t *testing.T) {
	t.Parallel()
	for i, sb := range []string{"local", "bwrap", "server"} {
		t.Run(sb, func(t *testing.T) {
			t.Parallel()
			if sb == "bwrap" {
				requireBwrap(t)
			}
			boot := "lh-runner-kill-bootstrap-" + sb
			k, admin := startRunnersServer(t, boot)
			ctx := t.Context()

			// Durations no other test uses, one per case and process.
			grandchild := fmt.Sprintf("607.%d1", i)
			detached := fmt.Sprintf("607.%d2", i)
			own := fmt.Sprintf("607.%d3", i)
			command := `(exec sleep ` + grandchild + `) & echo $! > grandchild.pid; ` +
				`setsid sh -c 'echo $$ > detached.pid; exec sleep ` + detached + `' & ` +
				`echo $$ > command.pid; touch started; sleep ` + own
			script, err := json.Marshal([]map[string]any{
				{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": command}}}},
				{"text": "finished"},
			})
			require.NoError(t, err)
			env := &lt.Environment{}
			var box *runnerProc
			workspaces := filepath.Join(k.srv.dataDir, "workspaces")
			if sb != "server" {
				runnerKey := k.create("runners", lt.RoleRunner)
				box = startRunner(t, k.srv.url, runnerKey.Key, "box1", "--label", "kill", "--sandbox", sb)
				env.Runner = &lt.RunnerSelector{Labels: []string{"kill"}}
				workspaces = filepath.Join(box.data, "workspaces")
			}
			s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
				Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Run it.",
				Tools: []lt.ToolSpec{{Name: "shell", Effect: lt.EffectIdempotent}}, Environment: env,
			}})
			require.NoError(t, err)
			ws := filepath.Join(workspaces, s.ID)
			sleeps := []string{"sleep\x00" + grandchild + "\x00", "sleep\x00" + detached + "\x00", "sleep\x00" + own + "\x00"}
			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(ws, "started"))
				return err == nil && allRunning(sleeps)
			}, time.Minute, 10*time.Millisecond, "the command and what it started run")
			var pids []int
			if sb != "bwrap" {
				for _, f := range []string{"grandchild.pid", "detached.pid", "command.pid"} {
					pids = append(pids, readPidFile(t, filepath.Join(ws, f)))
				}
			}

			if box != nil {
				box.kill(t)
			} else {
				k.srv.kill()
			}
			require.Eventually(t, func() bool {
				if !noneRunning(sleeps) {
					return false
				}
				for _, pid := range pids {
					if processRuns(pid) {
						return false
					}
				}
				return true
			}, 30*time.Second, 10*time.Millisecond, "every process of the command dies with the %s", sb)
		})
	}
}

// readPidFile reads a pid a command wrote, waiting until it is there.
func readPidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, time.Minute, 10*time.Millisecond, "%s is written", path)
	return pid
}

// processRuns reports whether pid is a live process (not gone, not a
// zombie) of this machine.
func processRuns(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// requireBwrap skips a test without bubblewrap, or fails it under CI=true.
func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is required in CI (.ci/run installs it)")
		}
		t.Skip("bwrap is not installed")
	}
}

// allRunning reports whether a process runs for each of cmdlines (see
// running).
func allRunning(cmdlines []string) bool {
	for _, c := range cmdlines {
		if !running(c) {
			return false
		}
	}
	return true
}

// noneRunning reports whether no process runs any of cmdlines.
func noneRunning(cmdlines []string) bool {
	for _, c := range cmdlines {
		if running(c) {
			return false
		}
	}
	return true
}
