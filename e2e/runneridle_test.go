package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRunnerIdleStopAndRecreate runs the real binary as a server and a
// `longhaul runner` process on loopback. A session on the runner, parked on
// a function call longer than its environment.idle_stop_seconds, has its
// environment stopped: environment.stopped is journaled and the runner
// frees the workspace (its directory is gone from the runner's data
// directory). The application's answer resumes the session: the
// environment is provisioned on the runner again and restored from the
// snapshot it was stopped at, the next command finds the file the first
// one wrote, and the model is told nothing.
func TestRunnerIdleStopAndRecreate(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-idle-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	box := startRunner(t, k.srv.url, runnerKey.Key, "box1")

	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: keptFileAgent(t,
		&lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}, IdleStopSeconds: 1})})
	require.NoError(t, err)
	ws := filepath.Join(box.data, "workspaces", s.ID)

	// journal reads the session's events (nil on an error: it is called
	// from Eventually's goroutine too).
	journal := func() []lt.Event {
		l, err := admin.ListEvents(ctx, s.ID, 0, 500)
		if err != nil {
			return nil
		}
		return l.Data
	}
	has := func(typ string) bool {
		for _, ev := range journal() {
			if ev.Type == typ {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return has(lt.EventEnvironmentStopped) }, time.Minute, 20*time.Millisecond,
		"the parked session's environment is stopped")
	_, err = os.Stat(ws)
	require.ErrorIs(t, err, os.ErrNotExist, "the runner freed the workspace")
	// A person's read of the stopped environment comes from the stop's
	// snapshot, and recreates nothing.
	l, err := admin.ListFiles(ctx, s.ID, "", "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromSnapshot, l.Source)
	require.Equal(t, sha256Of("kept\n"), entryNamed(t, l, "kept.txt").SHA256)
	kept, err := admin.GetFile(ctx, s.ID, "", "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept\n", string(kept))
	_, err = os.Stat(ws)
	require.ErrorIs(t, err, os.ErrNotExist, "a read rebuilds nothing on the runner")
	sess, err := admin.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionRequiresAction, sess.Status)
	require.Len(t, sess.RequiredActions, 1)
	require.Equal(t, lt.ActionFunctionCall, sess.RequiredActions[0].Type)

	_, err = admin.DecideAction(ctx, s.ID, sess.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`{"found":true}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := admin.GetSession(ctx, s.ID)
		return err == nil && got.Status == lt.SessionIdle
	}, time.Minute, 20*time.Millisecond)

	var order, pinned []string
	var stopped lt.EnvironmentStoppedData // the first one
	var restored lt.EnvironmentRestoredData
	var lastOutput string
	for _, ev := range journal() {
		switch ev.Type {
		case lt.EventEnvironmentStopped:
			if stopped.Snapshot == "" {
				require.NoError(t, json.Unmarshal(ev.Data, &stopped))
			}
		case lt.EventEnvironmentRestored:
			require.NoError(t, json.Unmarshal(ev.Data, &restored))
		case lt.EventEnvironmentOpened:
			var d lt.EnvironmentOpenedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			pinned = append(pinned, d.Runner)
		case lt.EventToolCompleted:
			var d lt.ToolCompletedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			lastOutput = string(d.Output)
		}
		switch ev.Type {
		case lt.EventEnvironmentStopped, lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored, lt.EventEnvironmentLost:
			order = append(order, ev.Type)
		}
	}
	// Idle again once its turn is over, it may already be stopped again.
	require.GreaterOrEqual(t, len(order), 3)
	require.Equal(t, []string{lt.EventEnvironmentStopped, lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored}, order[:3])
	for _, typ := range order[3:] {
		require.Equal(t, lt.EventEnvironmentStopped, typ)
	}
	require.Equal(t, "idle", stopped.Reason)
	require.Equal(t, "box1", stopped.Runner)
	require.NotEmpty(t, stopped.Snapshot)
	require.Equal(t, stopped.Snapshot, l.Snapshot, "the read came from the stop's snapshot")
	require.Equal(t, stopped.Snapshot, restored.Snapshot)
	require.Empty(t, restored.Note, "nothing was lost: the model is told nothing")
	require.Contains(t, lastOutput, "kept", "the workspace is intact")
	require.Equal(t, []string{"box1", "box1"}, pinned, "unpinned by the stop, pinned again where it was recreated")

	// Idle after its turn, the session's environment is stopped again,
	// and freed again on the runner.
	require.Eventually(t, func() bool {
		n := 0
		for _, ev := range journal() {
			if ev.Type == lt.EventEnvironmentStopped {
				n++
			}
		}
		return n == 2
	}, time.Minute, 20*time.Millisecond)
	_, err = os.Stat(ws)
	require.ErrorIs(t, err, os.ErrNotExist, "the runner freed the workspace again")
}
