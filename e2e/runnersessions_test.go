package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestSessionsOnRunners runs the real binary as a server and two runner
// processes on loopback. With no runner connected, a session whose agent
// asks for one waits in requires_action with an environment_connection
// action (nothing ran), which resolves by itself when a matching runner
// connects; another is stopped by the application's decision. Sessions
// assigned by label run their shell on the runner with that label: the
// file their command writes is in that runner's data directory, not the
// other's, nor the server's.
func TestSessionsOnRunners(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-sessions-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)

	onRunner := func(sel *lt.RunnerSelector) string {
		t.Helper()
		script, err := json.Marshal([]map[string]any{
			{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": `echo "$LONGHAUL_SESSION_ID" > where.txt`}}}},
			{"text": "done"},
		})
		require.NoError(t, err)
		s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Say where you are.",
			Tools: []lt.ToolSpec{{Name: "shell"}}, Environment: &lt.Environment{Runner: sel},
		}})
		require.NoError(t, err)
		return s.ID
	}
	status := func(id string, want lt.SessionStatus) *lt.Session {
		t.Helper()
		var s *lt.Session
		require.Eventually(t, func() bool {
			var err error
			s, err = admin.GetSession(ctx, id)
			return err == nil && s.Status == want
		}, time.Minute, 10*time.Millisecond, "session %s to be %s", id, want)
		return s
	}
	waiting := func(id string) lt.Action {
		t.Helper()
		status(id, lt.SessionRequiresAction)
		l, err := admin.ListActions(ctx, id, lt.ActionPending)
		require.NoError(t, err)
		require.Len(t, l.Data, 1)
		require.Equal(t, lt.ActionEnvironmentConnection, l.Data[0].Type)
		return l.Data[0]
	}
	ranOn := func(p *runnerProc, id string) bool {
		b, err := os.ReadFile(filepath.Join(p.data, "workspaces", id, "where.txt"))
		return err == nil && strings.TrimSpace(string(b)) == id
	}

	// A bad selector is refused, naming the field.
	_, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"never"}]`)}, Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1", Labels: []string{"gpu"}}},
	}})
	require.ErrorContains(t, err, "environment.runner")

	// No runner at all.
	gpuFirst := onRunner(&lt.RunnerSelector{Labels: []string{"gpu"}})
	act := waiting(gpuFirst)
	require.Equal(t, &lt.RunnerSelector{Labels: []string{"gpu"}}, act.Runner)
	require.Contains(t, act.Reason, "no matching runner is connected")
	nobody := onRunner(&lt.RunnerSelector{Name: "box9"})
	stopAct := waiting(nobody)
	_, err = admin.DecideAction(ctx, nobody, stopAct.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.ErrorContains(t, err, "resolves by itself when a matching runner connects")
	_, err = admin.DecideAction(ctx, nobody, stopAct.ID, &lt.Decision{Decision: lt.DecisionStop, Reason: "no such box"})
	require.NoError(t, err)
	stopped := status(nobody, lt.SessionFailed)
	require.Equal(t, lt.StopStopped, *stopped.StopReason)

	gpu := startRunner(t, k.srv.url, runnerKey.Key, "gpu1", "--label", "gpu", "--label", "linux")
	cpu := startRunner(t, k.srv.url, runnerKey.Key, "cpu1", "--label", "cpu", "--label", "linux")
	status(gpuFirst, lt.SessionIdle)
	require.True(t, ranOn(gpu, gpuFirst), "the waiting session ran on the gpu runner once it connected")
	require.False(t, ranOn(cpu, gpuFirst))
	acts, err := admin.ListActions(ctx, gpuFirst, lt.ActionResolved)
	require.NoError(t, err)
	require.Len(t, acts.Data, 1)
	require.Contains(t, string(acts.Data[0].Resolution), `"decision":"connected"`)

	// Both connected: each session on the runner its labels name.
	require.Eventually(t, func() bool {
		l, err := admin.ListRunners(ctx, "")
		return err == nil && len(l.Data) == 2
	}, time.Minute, 10*time.Millisecond)
	onCPU := onRunner(&lt.RunnerSelector{Labels: []string{"cpu"}})
	onGPU := onRunner(&lt.RunnerSelector{Labels: []string{"linux", "gpu"}})
	byName := onRunner(&lt.RunnerSelector{Name: "cpu1"})
	for _, id := range []string{onCPU, onGPU, byName} {
		status(id, lt.SessionIdle)
	}
	require.True(t, ranOn(cpu, onCPU) && !ranOn(gpu, onCPU), "labels cpu")
	require.True(t, ranOn(gpu, onGPU) && !ranOn(cpu, onGPU), "labels linux, gpu")
	require.True(t, ranOn(cpu, byName) && !ranOn(gpu, byName), "name cpu1")
	for _, id := range []string{gpuFirst, onCPU, onGPU} {
		_, err := os.Stat(filepath.Join(k.srv.dataDir, "workspaces", id, "where.txt"))
		require.ErrorIs(t, err, os.ErrNotExist, "nothing ran on the server's own node")
	}
	evs, err := admin.ListEvents(ctx, onGPU, 0, 500)
	require.NoError(t, err)
	var pinned []string
	for _, ev := range evs.Data {
		if ev.Type == lt.EventEnvironmentOpened {
			var d lt.EnvironmentOpenedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			pinned = append(pinned, d.Runner)
		}
	}
	require.Equal(t, []string{"gpu1"}, pinned, "the session is pinned to its runner in the journal")
}

// TestRunnerKilledMidCommand: a runner SIGKILLed while a session's shell
// command runs on it. An irreversible command (the shell's default) is in
// doubt: nothing runs it again blindly. An idempotent one stays started
// and, once the runner is back (same name, same data directory, which
// still holds the workspace), runs again with the same idempotency key;
// meanwhile the session waits for its runner (environment_connection).
// The runner sandboxes with bubblewrap, whose sandboxes die with it, so
// the lost attempt is over before the new one starts (the local plain
// sandbox's programs would outlive a SIGKILLed runner).
func TestRunnerKilledMidCommand(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is required in CI (.ci/run installs it)")
		}
		t.Skip("bwrap is not installed")
	}
	const boot = "lh-runner-killed-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	box := startRunner(t, k.srv.url, runnerKey.Key, "box1", "--label", "crash", "--sandbox", "bwrap")

	// The first attempt records its key and hangs until the runner dies;
	// a later one (the file exists) finishes.
	const command = `echo "$LONGHAUL_IDEMPOTENCY_KEY" >> attempts.log; if [ -f hung ]; then echo done; else touch hung; sleep 601.25; fi`
	start := func(effect lt.EffectClass) string {
		t.Helper()
		script, err := json.Marshal([]map[string]any{
			{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": command}}}},
			{"text": "finished"},
		})
		require.NoError(t, err)
		s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Run it.",
			Tools: []lt.ToolSpec{{Name: "shell", Effect: effect}}, Environment: &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"crash"}}},
		}})
		require.NoError(t, err)
		return s.ID
	}
	hung := func(id string) {
		t.Helper()
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(box.data, "workspaces", id, "hung"))
			return err == nil
		}, time.Minute, 10*time.Millisecond, "the command of %s runs on the runner", id)
	}
	pending := func(id string, typ lt.ActionType) lt.Action {
		t.Helper()
		var found lt.Action
		require.Eventually(t, func() bool {
			l, err := admin.ListActions(ctx, id, lt.ActionPending)
			if err != nil {
				return false
			}
			for _, a := range l.Data {
				if a.Type == typ {
					found = a
					return true
				}
			}
			return false
		}, time.Minute, 10*time.Millisecond, "a pending %s action on %s", typ, id)
		return found
	}

	irreversible := start(lt.EffectIrreversible)
	hung(irreversible)
	idempotent := start(lt.EffectIdempotent)
	hung(idempotent)
	require.True(t, running("sleep\x00601.25\x00"), "the two commands run")
	box.kill(t)

	doubt := pending(irreversible, lt.ActionInDoubt)
	require.Contains(t, doubt.Summary+doubt.Consequence+doubt.Call, "shell")
	pending(idempotent, lt.ActionEnvironmentConnection)

	// Back, with its workspaces: the idempotent call runs again with its
	// key; the irreversible one waits for a person.
	// The lost attempt died with the runner's sandbox.
	require.Eventually(t, func() bool { return !running("sleep\x00601.25\x00") }, time.Minute, 10*time.Millisecond)
	startRunner(t, k.srv.url, runnerKey.Key, "box1", "--label", "crash", "--sandbox", "bwrap", "--data", box.data)
	require.Eventually(t, func() bool {
		s, err := admin.GetSession(ctx, idempotent)
		return err == nil && s.Status == lt.SessionIdle
	}, time.Minute, 10*time.Millisecond)
	log, err := os.ReadFile(filepath.Join(box.data, "workspaces", idempotent, "attempts.log"))
	require.NoError(t, err)
	keys := strings.Fields(string(log))
	require.Len(t, keys, 2, "the lost attempt and the one after it")
	require.Equal(t, keys[0], keys[1], "the same idempotency key")

	log, err = os.ReadFile(filepath.Join(box.data, "workspaces", irreversible, "attempts.log"))
	require.NoError(t, err)
	require.Len(t, strings.Fields(string(log)), 1, "an irreversible call is never run again blindly")
	s, err := admin.GetSession(ctx, irreversible)
	require.NoError(t, err)
	require.Equal(t, lt.SessionRequiresAction, s.Status)
	_, err = admin.DecideAction(ctx, irreversible, doubt.ID, &lt.Decision{Decision: lt.DecisionSkip, Reason: "checked by hand"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := admin.GetSession(ctx, irreversible)
		return err == nil && s.Status == lt.SessionIdle
	}, time.Minute, 10*time.Millisecond)
}

// running reports whether a process of this machine has the command line
// cmdline (its arguments, each ended by a NUL byte, as /proc shows them).
func running(cmdline string) bool {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && string(b) == cmdline {
			return true
		}
	}
	return false
}
