package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRunnerSessionFiles runs the real binary as a server and a `longhaul
// runner` process on loopback. A session on the runner writes a file with
// a shell step and parks on a function call. A person's listing and
// download show the runner's file, read from the runner's workspace (the
// answer says so); a person's upload lands in the runner's workspace at
// once, and the next shell step there reads it; sqlite_query reads a
// database a shell step made there; an approval's diff is against the
// runner's file. With the runner gone, the
// same reads come from the session's latest snapshot, with the person's
// change laid over it, and say so.
func TestRunnerSessionFiles(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-files-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	box := startRunner(t, k.srv.url, runnerKey.Key, "box1")

	// A database the shell step makes on the runner (its bytes sent in
	// the command: the runner's machine needs no sqlite3).
	db := base64.StdEncoding.EncodeToString(environmenttest.SQLiteDatabase(t, "CREATE TABLE t(x TEXT)", "INSERT INTO t VALUES ('a row on the runner')"))
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{
			"command": "printf 'made on the runner' > made.txt && printf '%s' '" + db + "' | base64 -d > data.db"}}}},
		{"tool_calls": []map[string]any{{"name": "lookup", "arguments": map[string]any{}}}},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "cat person.txt"}}}},
		{"tool_calls": []map[string]any{{"name": "sqlite_query", "arguments": map[string]any{"database": "data.db", "sql": "SELECT x FROM t"}}}},
		{"tool_calls": []map[string]any{{"name": "write_file", "arguments": map[string]any{"path": "made.txt", "content": "changed by the agent"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Work on the runner.",
		Tools:       []lt.ToolSpec{{Name: "shell"}, {Name: "sqlite_query"}, {Name: "write_file"}, {Name: "lookup", Type: "function"}},
		Policies:    []lt.Policy{{Name: "ask-writes", Tool: "write_file", Decision: lt.PolicyAsk}},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}},
	}})
	require.NoError(t, err)
	onRunner := filepath.Join(box.data, "workspaces", s.ID)
	action := waitForAction(t, admin, s.ID, lt.ActionFunctionCall, "")

	l, err := admin.ListFiles(ctx, s.ID, "", "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromEnvironment, l.Source, "read from the runner's workspace")
	made := entryNamed(t, l, "made.txt")
	require.Equal(t, sha256Of("made on the runner"), made.SHA256)
	body, h := download(t, k.srv.url, boot, s.ID, "made.txt")
	require.Equal(t, "made on the runner", body)
	require.Equal(t, lt.FilesFromEnvironment, h.Get(lt.FilesSourceHeader))

	ch, err := admin.PutFile(ctx, s.ID, "person.txt", []byte("from a person"), "")
	require.NoError(t, err)
	require.Equal(t, sha256Of("from a person"), ch.SHA256)
	got, err := os.ReadFile(filepath.Join(onRunner, "person.txt"))
	require.NoError(t, err, "the change is applied to the runner's workspace at once")
	require.Equal(t, "from a person", string(got))
	body, _ = download(t, k.srv.url, boot, s.ID, "person.txt")
	require.Equal(t, "from a person", body)

	_, err = admin.DecideAction(ctx, s.ID, action, &lt.Decision{Output: json.RawMessage(`{"found":true}`)})
	require.NoError(t, err)
	approval := waitForAction(t, admin, s.ID, lt.ActionApproval, action)
	require.Contains(t, lastToolOutput(t, admin, s.ID, "shell"), "from a person", "the next shell step on the runner sees the person's file")
	require.Contains(t, lastToolOutput(t, admin, s.ID, "sqlite_query"), "a row on the runner", "sqlite_query reads the runner's database")
	_, err = os.Stat(filepath.Join(k.srv.dataDir, "workspaces", s.ID, "data.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "the server holds no copy of it")
	a, err := admin.GetAction(ctx, approval)
	require.NoError(t, err)
	evidence := strings.Join(a.Evidence, "\n")
	require.Contains(t, evidence, "-made on the runner", "the approval's diff is against the runner's file")
	require.Contains(t, evidence, "+changed by the agent")

	// The runner gone: the latest snapshot, and the person's change
	// (made after it, on a file the snapshot lacks) laid over it.
	_, err = admin.PutFile(ctx, s.ID, "later.txt", []byte("after the snapshot"), "")
	require.NoError(t, err)
	box.kill(t)
	require.Eventually(t, func() bool {
		l, err = admin.ListFiles(ctx, s.ID, "", "")
		return err == nil && l.Source == lt.FilesFromSnapshot
	}, time.Minute, 50*time.Millisecond, "read from the snapshot once the runner is gone")
	require.NotEmpty(t, l.Snapshot)
	require.Equal(t, sha256Of("made on the runner"), entryNamed(t, l, "made.txt").SHA256)
	require.Equal(t, sha256Of("after the snapshot"), entryNamed(t, l, "later.txt").SHA256)
	body, h = download(t, k.srv.url, boot, s.ID, "made.txt")
	require.Equal(t, "made on the runner", body)
	require.Equal(t, lt.FilesFromSnapshot, h.Get(lt.FilesSourceHeader))
	require.Equal(t, l.Snapshot, h.Get(lt.FilesSnapshotHeader))
	body, _ = download(t, k.srv.url, boot, s.ID, "later.txt")
	require.Equal(t, "after the snapshot", body)

	// A change made while the runner is gone is journaled only; the
	// session's next claim, on the runner back with its workspace,
	// applies just that one (no restore), and the agent goes on.
	_, err = admin.PutFile(ctx, s.ID, "offline.txt", []byte("while the runner was away"), "")
	require.NoError(t, err)
	startRunnerIn(t, k.srv.url, runnerKey.Key, "box1", box.data)
	_, err = admin.DecideAction(ctx, s.ID, approval, &lt.Decision{Decision: "approve"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := admin.GetSession(ctx, s.ID)
		return err == nil && got.Status == lt.SessionIdle
	}, time.Minute, 20*time.Millisecond)
	got, err = os.ReadFile(filepath.Join(onRunner, "offline.txt"))
	require.NoError(t, err, "caught up on the runner")
	require.Equal(t, "while the runner was away", string(got))
	got, err = os.ReadFile(filepath.Join(onRunner, "made.txt"))
	require.NoError(t, err)
	require.Equal(t, "changed by the agent", string(got))
	require.Zero(t, countEvents(t, admin, s.ID, lt.EventEnvironmentLost), "caught up, not restored")
}

// waitForAction waits until session id requires one action, of type typ
// and other than action prev, and returns its id.
func waitForAction(t *testing.T, c *client.Client, id string, typ lt.ActionType, prev string) string {
	t.Helper()
	var mu sync.Mutex // the condition runs in Eventually's goroutine
	var action, last string
	ok := assert.Eventually(t, func() bool {
		s, err := c.GetSession(t.Context(), id)
		if err != nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		last = fmt.Sprintf("%s %+v", s.Status, s.RequiredActions)
		if s.Status != lt.SessionRequiresAction || len(s.RequiredActions) != 1 || s.RequiredActions[0].Type != typ || s.RequiredActions[0].ID == prev {
			return false
		}
		action = s.RequiredActions[0].ID
		return true
	}, time.Minute, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.True(t, ok, "session %s: %s", id, last)
	return action
}

// countEvents counts the events of type typ of session id.
func countEvents(t *testing.T, c *client.Client, id, typ string) int {
	t.Helper()
	l, err := c.ListEvents(t.Context(), id, 0, 500)
	require.NoError(t, err)
	n := 0
	for _, ev := range l.Data {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// lastToolOutput is the output of the last completed call of tool.
func lastToolOutput(t *testing.T, c *client.Client, id, tool string) string {
	t.Helper()
	l, err := c.ListEvents(t.Context(), id, 0, 500)
	require.NoError(t, err)
	out := ""
	for _, ev := range l.Data {
		if ev.Type != lt.EventToolCompleted {
			continue
		}
		var d lt.ToolCompletedData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		if d.Tool == tool {
			out = string(d.Output)
		}
	}
	return out
}

func entryNamed(t *testing.T, l *lt.FileListing, name string) lt.FileEntry {
	t.Helper()
	for _, e := range l.Entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no %s in the listing %+v", name, l.Entries)
	return lt.FileEntry{}
}

func sha256Of(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// download GETs a live file of session id over HTTP, for its headers.
func download(t *testing.T, base, key, id, path string) (string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/sessions/"+id+"/files/"+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	return string(b), res.Header
}

// TestRunnerFilesAfterARunnerLostItsWorkspace runs the real binary as a
// server and a `longhaul runner`. A session on the runner writes a file
// with a shell step (checkpointed) and parks on a function call; the
// runner is replaced by one with a fresh data directory (it lost the
// workspace). A person's listing comes from the session's snapshot and
// leaves no workspace on the new runner; a person's upload is journaled,
// not written to a copy that is not the session's; the session's next
// step finds both its own file (restored) and the person's.
func TestRunnerFilesAfterARunnerLostItsWorkspace(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-lost-files-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	box := startRunner(t, k.srv.url, runnerKey.Key, "box1")
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "printf 'made on the runner' > made.txt"}}}},
		{"tool_calls": []map[string]any{{"name": "lookup", "arguments": map[string]any{}}}},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "cat made.txt person.txt"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Work on the runner.",
		Tools:       []lt.ToolSpec{{Name: "shell"}, {Name: "lookup", Type: "function"}},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}},
	}})
	require.NoError(t, err)
	action := waitForAction(t, admin, s.ID, lt.ActionFunctionCall, "")

	box.kill(t)
	require.Eventually(t, func() bool { return len(runnersOn(t, k.srv, boot)) == 0 }, 15*time.Second, 20*time.Millisecond)
	fresh := startRunner(t, k.srv.url, runnerKey.Key, "box1")
	require.Eventually(t, func() bool { return len(runnersOn(t, k.srv, boot)) == 1 }, 30*time.Second, 20*time.Millisecond)
	onRunner := filepath.Join(fresh.data, "workspaces", s.ID)
	l, err := admin.ListFiles(ctx, s.ID, "", "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromSnapshot, l.Source, "the new runner's workspace is not the session's")
	require.Equal(t, sha256Of("made on the runner"), entryNamed(t, l, "made.txt").SHA256)
	require.NoDirExists(t, onRunner, "a person's read leaves no workspace on the runner")

	_, err = admin.PutFile(ctx, s.ID, "person.txt", []byte("from a person"), "")
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(onRunner, "person.txt"), "journaled for the session's next claim")

	_, err = admin.DecideAction(ctx, s.ID, action, &lt.Decision{Output: json.RawMessage(`{"found":true}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := admin.GetSession(ctx, s.ID)
		return err == nil && got.Status == lt.SessionIdle
	}, time.Minute, 20*time.Millisecond)
	out := lastToolOutput(t, admin, s.ID, "shell")
	require.Contains(t, out, "made on the runner", "the session's snapshot was restored on the new runner")
	require.Contains(t, out, "from a person", "the person's change applied after it")
}
