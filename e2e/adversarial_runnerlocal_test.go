package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A runner's controls met the way an attacker meets them: a command that
// will not die when cancelled, under the plain sandbox (the one with no pid
// namespace to end its processes), and a runner whose socket directory
// another user can reach. Real binaries: a server and `longhaul runner`.

// runnerSession starts a session on the runner labelled label whose model
// runs command once, with the shell's effect class effect and the agent's
// network allowlist allow.
func runnerSession(ctx context.Context, t *testing.T, admin *client.Client, label, command string, effect lt.EffectClass, allow []string) string {
	t.Helper()
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": command}}}},
		{"text": "finished"},
	})
	require.NoError(t, err)
	env := &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{label}}}
	if len(allow) > 0 {
		env.Network = &lt.NetworkSpec{Allow: allow}
	}
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Run it.",
		Tools: []lt.ToolSpec{{Name: "shell", Effect: effect}}, Environment: env,
	}})
	require.NoError(t, err)
	return s.ID
}

// TestAdversarialRunnerLocal_CancelTrapsSignals: a command that ignores
// every signal it can, and starts a grandchild and a setsid daemon that do
// too, is gone with all of them within the cancel's bound; the session is
// cancelled.
func TestAdversarialRunnerLocal_CancelTrapsSignals(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runner-cancel-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	startRunner(t, k.srv.url, runnerKey.Key, "box1", "--label", "trap", "--sandbox", "local")

	const command = `trap '' TERM INT HUP QUIT USR1 USR2; ` +
		`(trap '' TERM INT HUP; exec sleep 609.25) & ` +
		`setsid sh -c "trap '' TERM INT HUP; exec sleep 609.5" & ` +
		`touch started; while :; do sleep 609.75; done`
	id := runnerSession(ctx, t, admin, "trap", command, lt.EffectIdempotent, nil)
	sleeps := []string{"sleep\x00609.25\x00", "sleep\x00609.5\x00", "sleep\x00609.75\x00"}
	require.Eventually(t, func() bool { return allRunning(sleeps) }, time.Minute, 10*time.Millisecond, "the command and what it started run")

	start := time.Now()
	_, err := admin.Cancel(ctx, id, &lt.CancelRequest{Reason: "enough"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := admin.GetSession(ctx, id)
		return err == nil && s.Status == lt.SessionCancelled
	}, cancelWithin, 10*time.Millisecond, "the session is cancelled")
	require.Less(t, time.Since(start), cancelWithin)
	require.Eventually(t, func() bool { return noneRunning(sleeps) }, cancelWithin, 10*time.Millisecond, "nothing the cancelled command started runs")
}

// TestAdversarialRunnerLocal_SocketDirNotItsOwn: a runner (with bwrap: the
// plain sandbox starts no egress proxy) whose socket
// directory another user may write in, or owns, refuses to put a session's
// egress proxy socket there (another user could swap it and see or steer
// the sandbox's traffic): the call fails saying why, naming no path, and
// no socket appears in it.
func TestAdversarialRunnerLocal_SocketDirNotItsOwn(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("giving the directory to another user needs root")
	}
	requireBwrap(t)
	const boot = "lh-adv-runner-sockets-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)

	for i, c := range []struct {
		name    string
		prepare func(dir string) error
		says    string
	}{
		{"world-writable", func(dir string) error { return os.Chmod(dir, 0o777) }, "others may write in it"},
		{"another user's", func(dir string) error { return os.Chown(dir, 65534, 65534) }, "owned by another user"},
	} {
		data := filepath.Join(t.TempDir(), "runner")
		sockets := filepath.Join(data, "sockets")
		require.NoError(t, os.MkdirAll(sockets, 0o700))
		require.NoError(t, c.prepare(sockets), c.name)
		label := "sockets" + string(rune('a'+i))
		startRunner(t, k.srv.url, runnerKey.Key, "box"+label, "--label", label, "--sandbox", "bwrap", "--data", data)

		id := runnerSession(ctx, t, admin, label, "echo ran > ran.txt", lt.EffectIdempotent, []string{"example.com"})
		var said string
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(said, "socket directory") {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the session never says the socket directory is refused; its events: %s", c.name, said)
			}
			time.Sleep(10 * time.Millisecond) // polling with a deadline
			evs, err := admin.ListEvents(ctx, id, 0, 500)
			if err != nil {
				said = err.Error()
				continue
			}
			raw, _ := json.Marshal(evs)
			said = string(raw)
		}
		require.Contains(t, said, c.says, c.name)
		require.NotContains(t, said, sockets, "%s: the error names no host path", c.name)
		entries, err := os.ReadDir(sockets)
		require.NoError(t, err)
		require.Empty(t, entries, "%s: no socket was made in it", c.name)
		_, err = os.Stat(filepath.Join(data, "workspaces", id, "ran.txt"))
		require.ErrorIs(t, err, os.ErrNotExist, "%s: the command did not run", c.name)
	}
}
