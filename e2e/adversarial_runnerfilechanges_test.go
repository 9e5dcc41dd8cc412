package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A person's changes of a session on a runner, attacked from the outside
// with the real binary: a change that cannot be checked against the live
// workspace, or that would not fit it, is refused before anything is
// journaled.

// personChanges counts the workspace.changed events of session id.
func personChanges(t *testing.T, c *client.Client, id string) int {
	t.Helper()
	l, err := c.ListEvents(t.Context(), id, 0, 500)
	require.NoError(t, err)
	n := 0
	for _, ev := range l.Data {
		if ev.Type == lt.EventWorkspaceChanged {
			n++
		}
	}
	return n
}

// requireRefused checks err is an API error of status whose message
// contains want.
func requireRefused(t *testing.T, err error, status int, want, what string) {
	t.Helper()
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr, what)
	require.Equal(t, status, apiErr.Status, "%s: %v", what, err)
	require.Contains(t, apiErr.Message, want, what)
}

// parkedOnBox1 creates, through c, a session on runner box1 (env adds to
// its environment) whose scripted model runs command there, then waits
// for a function result; it returns the session once it waits.
func parkedOnBox1(t *testing.T, c *client.Client, command string, env lt.Environment) *lt.Session {
	t.Helper()
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": command}}}},
		{"tool_calls": []map[string]any{{"name": "lookup", "arguments": map[string]any{}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	env.Runner = &lt.RunnerSelector{Name: "box1"}
	s, err := c.CreateSession(t.Context(), &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Work on the runner.",
		Tools:       []lt.ToolSpec{{Name: "shell"}, {Name: "lookup", Type: "function"}},
		Environment: &env,
	}})
	require.NoError(t, err)
	waitForAction(t, c, s.ID, lt.ActionFunctionCall, "")
	return s
}

// TestAdversarialRunnerFiles_WriteThroughAnotherNode: two nodes on one
// PostgreSQL store, the session's runner connected to node B. A person's
// upload or delete sent to node A (which can only check it against the
// journal's snapshot, not the runner's live file) is a 409 naming the
// runner, journals nothing and leaves the runner's file as the model wrote
// it; sent to node B, it is made.
func TestAdversarialRunnerFiles_WriteThroughAnotherNode(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runner-files-node-bootstrap"
	n := startRunnerNodes(t, boot)
	key := runnerKeyOn(t, n.a, boot, "box")
	onB := startRunner(t, n.b.url, key.Key, "box1")
	require.Eventually(t, func() bool {
		l := runnersOn(t, n.a, boot)
		return len(l) == 1 && l[0].Node == n.idB
	}, 30*time.Second, 20*time.Millisecond, "node A lists the runner on node B")
	ctx := t.Context()
	viaA, err := client.New(n.a.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	viaB, err := client.New(n.b.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	s := parkedOnBox1(t, viaA, "echo by-the-model > a.txt", lt.Environment{})

	_, err = viaA.PutFile(ctx, s.ID, "a.txt", []byte("by-a-person\n"), "")
	requireRefused(t, err, http.StatusConflict, "box1", "an upload through node A")
	_, err = viaA.PutFile(ctx, s.ID, "new.txt", []byte("by-a-person\n"), "")
	requireRefused(t, err, http.StatusConflict, "box1", "a new file through node A")
	_, err = viaA.DeleteFile(ctx, s.ID, "a.txt")
	requireRefused(t, err, http.StatusConflict, "box1", "a delete through node A")
	require.Zero(t, personChanges(t, viaA, s.ID), "nothing journaled")
	onRunner := filepath.Join(onB.data, "workspaces", s.ID)
	got, err := os.ReadFile(filepath.Join(onRunner, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-the-model\n", string(got), "the runner's file is untouched")
	require.NoFileExists(t, filepath.Join(onRunner, "new.txt"))

	_, err = viaB.PutFile(ctx, s.ID, "a.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err, "through the runner's node")
	got, err = os.ReadFile(filepath.Join(onRunner, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-a-person\n", string(got), "applied on the runner at once")
	require.Equal(t, 1, personChanges(t, viaA, s.ID))
}

// TestAdversarialRunnerFiles_WriteOverQuota: a person's upload that would
// take a runner's workspace over environment.disk_mb is a 413 naming it
// and journals nothing: with the runner connected (it answers with its
// usage) and with the runner gone (the usage estimated from the last
// snapshot), for an upload that fits the quota alone but not with what the
// model wrote.
func TestAdversarialRunnerFiles_WriteOverQuota(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runner-files-quota-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	r := startRunner(t, k.srv.url, runnerKey.Key, "box1")
	s := parkedOnBox1(t, admin, "head -c 700000 /dev/zero > big.bin", lt.Environment{DiskMB: 1})

	_, err := admin.PutFile(ctx, s.ID, "more.bin", make([]byte, 500_000), "")
	requireRefused(t, err, http.StatusRequestEntityTooLarge, "environment.disk_mb", "the runner connected")
	require.Zero(t, personChanges(t, admin, s.ID), "nothing journaled")

	r.kill(t)
	require.Eventually(t, func() bool {
		l, err := admin.ListRunners(ctx, "")
		if err != nil {
			return false
		}
		for _, x := range l.Data {
			if x.Name == "box1" {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the runner is gone (only connected runners are listed)")
	_, err = admin.PutFile(ctx, s.ID, "more.bin", make([]byte, 500_000), "")
	requireRefused(t, err, http.StatusRequestEntityTooLarge, "environment.disk_mb", "the runner gone")
	require.Zero(t, personChanges(t, admin, s.ID), "nothing journaled")
	_, err = admin.PutFile(ctx, s.ID, "fits.txt", []byte("fits"), "")
	require.NoError(t, err, "an upload that fits is journaled for the next claim")
	require.Equal(t, 1, personChanges(t, admin, s.ID))
}

// TestAdversarialRunnerFiles_CheckpointSnapshotOfAnotherProject: a
// checkpoint whose snapshot the session's project does not own (a journal
// from before owners were kept, or one that names another project's tree)
// is not served by the checkpoint file routes, even though another
// project owns it: a listing and a download are a 409 and give none of
// its bytes.
func TestAdversarialRunnerFiles_CheckpointSnapshotOfAnotherProject(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runner-files-owner-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	startRunner(t, k.srv.url, runnerKey.Key, "box1")
	s := parkedOnBox1(t, admin, "echo not-for-you > a.txt", lt.Environment{})
	cps, err := admin.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	var cp lt.Checkpoint
	for _, c := range cps.Data {
		if c.Snapshot != "" {
			cp = c
		}
	}
	require.NotEmpty(t, cp.Snapshot, "a checkpoint with a snapshot")
	get := func(path string) httpResult {
		return k.send(boot, http.MethodGet, "/v1/sessions/"+s.ID+"/checkpoints/"+cp.ID+"/files"+path, "")
	}
	require.Equal(t, http.StatusOK, get("/a.txt").status, "served while the project owns it")

	// Another project owns every blob the session's project owned.
	// The server's writer may hold the file's lock (a lease renewal, the
	// runner's report): the statement waits for it (openDataDB).
	_, err = openDataDB(t, k.srv).ExecContext(ctx, `UPDATE blob_owners SET project = 'beta' WHERE project = ?`, lt.DefaultProject)
	require.NoError(t, err)

	for _, path := range []string{"", "/a.txt"} {
		r := get(path)
		require.Equal(t, http.StatusConflict, r.status, "%s: %s", path, r.body)
		require.Contains(t, string(r.body), "not its session's project's", path)
		require.NotContains(t, string(r.body), "not-for-you", path)
	}
}
