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
	a := parkedOnAKilledRunner(t, "lh-runner-conflict-bootstrap", "Keep a file.",
		[]map[string]any{shellOf("echo first > x.txt")},
		[]map[string]any{shellOf("echo by-the-model > x.txt"), {"name": "lookup", "arguments": map[string]any{}}},
		[]map[string]any{shellOf("cat x.txt")})
	ctx := t.Context()
	x, err := a.admin.GetFile(ctx, a.s.ID, "", "x.txt")
	require.NoError(t, err)
	require.Equal(t, "first\n", string(x), "the person sees the journal's snapshot")
	change, err := a.admin.PutFile(ctx, a.s.ID, "x.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sha256Of("first\n"), change.BasedOn)

	lastOutput, notApplied := a.resume(t)
	require.Contains(t, lastOutput, "by-the-model", "the model's edit is kept")
	require.Equal(t, []lt.WorkspaceChangeNotAppliedData{{ChangeSeq: change.Seq, Op: lt.WorkspaceWrite, Path: "x.txt", Reason: lt.NotAppliedConflict,
		BasedOn: "sha256:" + sha256Of("first\n"), Found: "sha256:" + sha256Of("by-the-model\n")}}, notApplied)
	got, err := os.ReadFile(filepath.Join(a.r.data, "workspaces", a.s.ID, "x.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-the-model\n", string(got))
}

// shellOf is a scripted call of the shell tool running cmd.
func shellOf(cmd string) map[string]any {
	return map[string]any{"name": "shell", "arguments": map[string]any{"command": cmd}}
}

// killedRunnerSession is a session of a real server parked on a lookup
// while its runner (box1, the real binary) is killed.
type killedRunnerSession struct {
	k      *keyed
	admin  *client.Client
	key    string
	r      *runnerProc
	s      *lt.Session
	action string
}

// parkedOnAKilledRunner starts a server and runner box1, runs a session
// on it whose steps (each a list of tool calls; one of them a lookup, on
// which it parks) are followed by a last answer, and kills the runner
// once the session waits, so that a person's change is checked against
// the journal's snapshot view.
func parkedOnAKilledRunner(t *testing.T, boot, instructions string, steps ...[]map[string]any) *killedRunnerSession {
	t.Helper()
	a := &killedRunnerSession{}
	a.k, a.admin = startRunnersServer(t, boot)
	ctx := t.Context()
	a.key = a.k.create("runners", lt.RoleRunner).Key
	a.r = startRunner(t, a.k.srv.url, a.key, "box1")
	script := make([]map[string]any, 0, len(steps)+1)
	for _, calls := range steps {
		script = append(script, map[string]any{"tool_calls": calls})
	}
	raw, err := json.Marshal(append(script, map[string]any{"text": "done"}))
	require.NoError(t, err)
	a.s, err = a.admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: raw}, Instructions: instructions,
		Tools:       []lt.ToolSpec{{Name: "shell"}, {Name: "lookup", Type: "function"}},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}},
	}})
	require.NoError(t, err)
	a.action = waitForAction(t, a.admin, a.s.ID, lt.ActionFunctionCall, "")

	a.r.kill(t)
	require.Eventually(t, func() bool {
		l, err := a.admin.ListRunners(ctx, "")
		return err == nil && len(l.Data) == 0
	}, 30*time.Second, 20*time.Millisecond, "the runner is gone")
	return a
}

// resume starts the runner again with its workspaces, decides the lookup
// and waits until the session is idle; it returns the last tool output
// and the changes journaled as not applied.
func (a *killedRunnerSession) resume(t *testing.T) (string, []lt.WorkspaceChangeNotAppliedData) {
	t.Helper()
	ctx := t.Context()
	startRunnerIn(t, a.k.srv.url, a.key, "box1", a.r.data)
	_, err := a.admin.DecideAction(ctx, a.s.ID, a.action, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := a.admin.GetSession(ctx, a.s.ID)
		return err == nil && got.Status == lt.SessionIdle
	}, time.Minute, 20*time.Millisecond)

	l, err := a.admin.ListEvents(ctx, a.s.ID, 0, 500)
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
