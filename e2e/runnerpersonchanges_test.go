package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRunnerRecreateKeepsTheModelsEditOfAPersonsFile runs the real binary
// as a server and a `longhaul runner`. A person writes x.txt while the
// session waits; the model then overwrites it and waits again in the same
// step (no checkpoint since the person's write), and the environment is
// stopped for idleness. The stop's snapshot holds the person's change
// (environment.stopping's person_changes_through), so the recreate does
// not apply it again: the model finds its own x.txt, and is told nothing.
func TestRunnerRecreateKeepsTheModelsEditOfAPersonsFile(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-pchg-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	startRunner(t, k.srv.url, runnerKey.Key, "box1")

	shell := func(cmd string) map[string]any {
		return map[string]any{"name": "shell", "arguments": map[string]any{"command": cmd}}
	}
	lookup := map[string]any{"name": "lookup", "arguments": map[string]any{}}
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{shell("echo first > x.txt")}},
		{"tool_calls": []map[string]any{lookup, shell("echo by-the-model > x.txt"), lookup}},
		{"tool_calls": []map[string]any{shell("cat x.txt")}},
		{"text": "done"},
	})
	require.NoError(t, err)
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Keep a file.",
		Tools:       []lt.ToolSpec{{Name: "shell"}, {Name: "lookup", Type: "function"}},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}, IdleStopSeconds: 1},
	}})
	require.NoError(t, err)

	journal := func() []lt.Event {
		l, err := admin.ListEvents(ctx, s.ID, 0, 500)
		if err != nil {
			return nil
		}
		return l.Data
	}
	// waitAction waits for the session to require a function call other
	// than done (not the environment_connection of a runner not connected
	// yet), and returns it.
	waitAction := func(done string) lt.Action {
		t.Helper()
		var a lt.Action
		require.Eventually(t, func() bool {
			got, err := admin.GetSession(ctx, s.ID)
			if err != nil || got.Status != lt.SessionRequiresAction || len(got.RequiredActions) != 1 || got.RequiredActions[0].ID == done ||
				got.RequiredActions[0].Type != lt.ActionFunctionCall {
				return false
			}
			a = got.RequiredActions[0]
			return true
		}, time.Minute, 20*time.Millisecond)
		return a
	}

	first := waitAction("")
	// The idle stop may be under way: a write then meets a 409, and is
	// sent again.
	var change *lt.WorkspaceChange
	require.Eventually(t, func() bool {
		change, err = admin.PutFile(ctx, s.ID, "x.txt", []byte("by-a-person\n"), "")
		return err == nil
	}, time.Minute, 20*time.Millisecond)
	_, err = admin.DecideAction(ctx, s.ID, first.ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	second := waitAction(first.ID)

	// Stopped again, after the model's edit, at a snapshot that holds the
	// person's change.
	require.Eventually(t, func() bool {
		for _, ev := range journal() {
			if ev.Type != lt.EventEnvironmentStopping || ev.Seq < change.Seq {
				continue
			}
			var d lt.EnvironmentStoppingData
			if json.Unmarshal(ev.Data, &d) == nil && d.PersonChangesThrough == change.Seq {
				return true
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, "an idle stop after the model's edit")
	require.Eventually(t, func() bool {
		got, err := admin.GetSession(ctx, s.ID)
		if err != nil {
			return false
		}
		evs := journal()
		return got.Status == lt.SessionRequiresAction && len(evs) > 0 && evs[len(evs)-1].Type != lt.EventEnvironmentStopping
	}, time.Minute, 20*time.Millisecond)
	x, err := admin.GetFile(ctx, s.ID, "", "x.txt")
	require.NoError(t, err)
	require.Equal(t, "by-the-model\n", string(x), "a read of the stopped environment shows the model's bytes")

	_, err = admin.DecideAction(ctx, s.ID, second.ID, &lt.Decision{Output: json.RawMessage(`2`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := admin.GetSession(ctx, s.ID)
		return err == nil && got.Status == lt.SessionIdle
	}, time.Minute, 20*time.Millisecond)
	var lastOutput string
	var restored []lt.EnvironmentRestoredData
	for _, ev := range journal() {
		switch ev.Type {
		case lt.EventToolCompleted:
			var d lt.ToolCompletedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			lastOutput = string(d.Output)
		case lt.EventEnvironmentRestored:
			var d lt.EnvironmentRestoredData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			restored = append(restored, d)
		}
	}
	require.NotEmpty(t, restored)
	require.Empty(t, restored[len(restored)-1].Note, "nothing was lost: the model is told nothing")
	require.Contains(t, lastOutput, "by-the-model")
	require.NotContains(t, lastOutput, "by-a-person", "the person's change is not applied again over the model's edit")
}
