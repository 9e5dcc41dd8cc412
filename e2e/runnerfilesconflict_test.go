package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRunnerKeepsTheModelsEditOverAChangeFromTheSnapshot runs the real
// binary as a server and a `longhaul runner`. The model writes x.txt after
// its last checkpoint and waits; the runner is then killed, so a person's
// upload of x.txt is checked against the journal's snapshot (the older
// x.txt) and journaled with what it was based on. The runner comes back
// with its workspace: the change is not applied over the model's edit
// (workspace.change_not_applied, with both hashes), and the model reads
// its own x.txt.
func TestRunnerKeepsTheModelsEditOverAChangeFromTheSnapshot(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-conflict-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	r := startRunner(t, k.srv.url, runnerKey.Key, "box1")

	s, action := parkedOnBox1ThenKilled(t, admin, r, "echo first > x.txt", "echo by-the-model > x.txt", "cat x.txt")
	x, err := admin.GetFile(ctx, s.ID, "", "x.txt")
	require.NoError(t, err)
	require.Equal(t, "first\n", string(x), "the person sees the journal's snapshot")
	change, err := admin.PutFile(ctx, s.ID, "x.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sha256Of("first\n"), change.BasedOn)

	startRunnerIn(t, k.srv.url, runnerKey.Key, "box1", r.data)
	lastOutput, notApplied := decideThenChangesNotApplied(t, admin, s.ID, action)
	require.Contains(t, lastOutput, "by-the-model", "the model's edit is kept")
	require.Equal(t, []lt.WorkspaceChangeNotAppliedData{{ChangeSeq: change.Seq, Op: lt.WorkspaceWrite, Path: "x.txt", Reason: lt.NotAppliedConflict,
		BasedOn: "sha256:" + sha256Of("first\n"), Found: "sha256:" + sha256Of("by-the-model\n")}}, notApplied)
	got, err := os.ReadFile(filepath.Join(r.data, "workspaces", s.ID, "x.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-the-model\n", string(got))
}

// decideThenChangesNotApplied answers the session's function call action,
// waits until the session is idle, and returns the last tool output and
// the workspace.change_not_applied events' data.
func decideThenChangesNotApplied(t *testing.T, admin *client.Client, sessionID, action string) (string, []lt.WorkspaceChangeNotAppliedData) {
	t.Helper()
	ctx := t.Context()
	_, err := admin.DecideAction(ctx, sessionID, action, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := admin.GetSession(ctx, sessionID)
		return err == nil && got.Status == lt.SessionIdle
	}, time.Minute, 20*time.Millisecond)

	l, err := admin.ListEvents(ctx, sessionID, 0, 500)
	require.NoError(t, err)
	var lastOutput string
	var notApplied []lt.WorkspaceChangeNotAppliedData
	for _, ev := range l.Data {
		switch ev.Type {
		case lt.EventToolCompleted:
			var d lt.ToolCompletedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			lastOutput = string(d.Output)
		case lt.EventWorkspaceChangeNotApplied:
			var d lt.WorkspaceChangeNotAppliedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			notApplied = append(notApplied, d)
		}
	}
	return lastOutput, notApplied
}

// parkedOnBox1ThenKilled creates a session on runner box1 (r) whose model
// runs before in one step, then before the function call lookup
// (parking the session on it), and after it; it kills r once the session
// waits and returns the session and the action to answer.
func parkedOnBox1ThenKilled(t *testing.T, admin *client.Client, r *runnerProc, first, withLookup, after string) (*lt.Session, string) {
	t.Helper()
	ctx := t.Context()
	shell := func(cmd string) map[string]any {
		return map[string]any{"name": "shell", "arguments": map[string]any{"command": cmd}}
	}
	second := []map[string]any{{"name": "lookup", "arguments": map[string]any{}}}
	if withLookup != "" {
		second = append([]map[string]any{shell(withLookup)}, second...)
	}
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{shell(first)}},
		{"tool_calls": second},
		{"tool_calls": []map[string]any{shell(after)}},
		{"text": "done"},
	})
	require.NoError(t, err)
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Keep a file.",
		Tools:       []lt.ToolSpec{{Name: "shell"}, {Name: "lookup", Type: "function"}},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}},
	}})
	require.NoError(t, err)
	action := waitForAction(t, admin, s.ID, lt.ActionFunctionCall, "")

	r.kill(t)
	require.Eventually(t, func() bool {
		l, err := admin.ListRunners(ctx, "")
		return err == nil && len(l.Data) == 0
	}, 30*time.Second, 20*time.Millisecond, "the runner is gone")
	return s, action
}
