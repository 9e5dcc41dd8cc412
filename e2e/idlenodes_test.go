package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// keptFileAgent is the agent of the idle stop tests, in env: a command
// writes kept.txt, a function call (lookup) parks the session, and once it
// is answered a command reads the file back.
func keptFileAgent(t *testing.T, env *lt.Environment) *lt.AgentSpec {
	t.Helper()
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "echo kept > kept.txt"}}}},
		{"tool_calls": []map[string]any{{"name": "lookup", "arguments": map[string]any{}}}},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "cat kept.txt"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	return &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Keep a file.",
		Tools: []lt.ToolSpec{{Name: "shell"}, {Name: "lookup", Type: "function"}}, Environment: env,
	}
}

// parkedOnLookup waits until the session of keptFileAgent parks on its
// function call, and returns the action's id.
func parkedOnLookup(t *testing.T, api *client.Client, id string) string {
	t.Helper()
	var action string
	require.Eventually(t, func() bool {
		got, err := api.GetSession(t.Context(), id)
		if err != nil || got.Status != lt.SessionRequiresAction || len(got.RequiredActions) != 1 {
			return false
		}
		action = got.RequiredActions[0].ID
		return got.RequiredActions[0].Type == lt.ActionFunctionCall
	}, time.Minute, 20*time.Millisecond, "the session parks on its function call")
	return action
}

// answerLookupAndCheckKept answers the parked function call of
// keptFileAgent's session, waits until its turn is over, and checks that
// the command after it read the file the first one wrote.
func answerLookupAndCheckKept(t *testing.T, api *client.Client, id, action string) {
	t.Helper()
	_, err := api.DecideAction(t.Context(), id, action, &lt.Decision{Output: json.RawMessage(`{"found":true}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := api.GetSession(t.Context(), id)
		return err == nil && got.Status == lt.SessionIdle
	}, time.Minute, 20*time.Millisecond)
	require.Contains(t, lastToolOutput(t, api, id, "shell"), "kept", "the workspace is intact after the recreate")
}

// TestIdleStopOnAnotherNodeFreesEveryCopy runs two real server nodes on one
// PostgreSQL store, with the local backend (each node keeps its own copy of
// a workspace in its data directory). Node A runs a session until it parks
// on a function call; A is then stalled (SIGSTOP) and node B, which never
// ran the session, claims its idle stop. B leaves no copy of its own, and
// once A goes on it discards its copy too: the stop frees the workspace on
// every node. The application's answer recreates the environment, and the
// next command finds the file the first one wrote.
func TestIdleStopOnAnotherNodeFreesEveryCopy(t *testing.T) {
	t.Parallel()
	const boot = "lh-idle-nodes-bootstrap"
	c := newCluster(t, pgtest.FreshSchema(t), 4*time.Second)
	c.args = append(c.args, "--api-key", boot)
	a := c.nodes[c.add()]
	ctx := t.Context()
	onA, err := client.New(a.url, &client.Config{APIKey: boot})
	require.NoError(t, err)

	// Long enough for node B to be up before the stop is due, with node A
	// stalled by then.
	const idle = 8
	s, err := onA.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: keptFileAgent(t, &lt.Environment{IdleStopSeconds: idle})})
	require.NoError(t, err)
	parkedAt := time.Now()
	action := parkedOnLookup(t, onA, s.ID)
	copyOnA := filepath.Join(a.dataDir, "workspaces", s.ID)
	b, err := os.ReadFile(filepath.Join(copyOnA, "kept.txt"))
	require.NoError(t, err, "node A ran the session: it holds the copy")
	require.Equal(t, "kept\n", string(b))

	a.pause()
	require.Less(t, time.Since(parkedAt), time.Duration(idle)*time.Second,
		"node A was stalled before the idle stop was due (the machine is too slow for this test)")
	nb := c.add()
	srvB, idB := c.nodes[nb], c.ids[nb]
	onB, err := client.New(srvB.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	var stop lt.Event
	require.Eventually(t, func() bool {
		l, err := onB.ListEvents(ctx, s.ID, 0, 500)
		if err != nil {
			return false
		}
		for _, ev := range l.Data {
			if ev.Type == lt.EventEnvironmentStopped {
				stop = ev
				return true
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, "node B stops the parked session's environment")
	require.Equal(t, idB, stop.WorkerID, "the stop ran on node B, which did not run the session")
	_, err = os.Stat(filepath.Join(srvB.dataDir, "workspaces", s.ID))
	require.ErrorIs(t, err, os.ErrNotExist, "node B keeps no copy")
	_, err = os.Stat(copyOnA)
	require.NoError(t, err, "node A, stalled, still has its copy")

	a.resume()
	require.Eventually(t, func() bool {
		_, err := os.Stat(copyOnA)
		return os.IsNotExist(err)
	}, 30*time.Second, 20*time.Millisecond, "node A discards its copy of the stopped environment")

	answerLookupAndCheckKept(t, onB, s.ID, action)
	var order []string
	for _, ev := range eventsOf(ctx, t, onB, s.ID, lt.EventEnvironmentStopped, lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored) {
		order = append(order, ev.Type)
	}
	require.GreaterOrEqual(t, len(order), 3)
	require.Equal(t, []string{lt.EventEnvironmentStopped, lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored}, order[:3])
}

// TestRunnerIdleStopOnTwoNodes: two server nodes on one PostgreSQL store
// and a `longhaul runner`. The session runs on the runner while it is
// connected to node A and parks; the runner then restarts (same data
// directory, same workspaces) connected to node B. The idle stop, whichever
// node claims it, runs where the runner is (node B) and frees the copy the
// runner kept from its time with node A; the application's answer recreates
// it there from the stop's snapshot, and the model is told nothing.
func TestRunnerIdleStopOnTwoNodes(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-idle-nodes-bootstrap"
	n := startRunnerNodes(t, boot)
	key := runnerKeyOn(t, n.a, boot, "box")
	data := filepath.Join(t.TempDir(), "runner")
	viaA := startRunnerIn(t, n.a.url, key.Key, "box1", data)
	ctx := t.Context()
	onB, err := client.New(n.b.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l := runnersOn(t, n.b, boot)
		return len(l) == 1 && l[0].Node == n.idA
	}, 30*time.Second, 20*time.Millisecond, "node B lists the runner on node A")

	s, err := onB.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: keptFileAgent(t,
		&lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}, IdleStopSeconds: 4})})
	require.NoError(t, err)
	action := parkedOnLookup(t, onB, s.ID)
	ws := filepath.Join(data, "workspaces", s.ID)
	_, err = os.Stat(filepath.Join(ws, "kept.txt"))
	require.NoError(t, err, "the runner holds the workspace")

	viaA.kill(t)
	startRunnerIn(t, n.b.url, key.Key, "box1", data)
	var stopped lt.EnvironmentStoppedData
	require.Eventually(t, func() bool {
		for _, ev := range eventsOf(ctx, t, onB, s.ID, lt.EventEnvironmentStopped) {
			if ev.WorkerID != n.idB {
				return false
			}
			return json.Unmarshal(ev.Data, &stopped) == nil
		}
		return false
	}, time.Minute, 20*time.Millisecond, "node B, which holds the runner now, stops the environment")
	require.Equal(t, "box1", stopped.Runner)
	require.NotEmpty(t, stopped.Snapshot, "the runner's copy was the journal's: its snapshot is kept")
	_, err = os.Stat(ws)
	require.ErrorIs(t, err, os.ErrNotExist, "the runner freed the copy it kept since node A")

	answerLookupAndCheckKept(t, onB, s.ID, action)
	restored := eventData[lt.EnvironmentRestoredData](ctx, t, onB, s.ID, lt.EventEnvironmentRestored)
	require.NotEmpty(t, restored)
	require.Equal(t, stopped.Snapshot, restored[0].Snapshot)
	require.Empty(t, restored[0].Note, "nothing was lost: the model is told nothing")
}
