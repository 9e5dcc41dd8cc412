package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAdversarialRunnerFiles: a model on a runner points symlinks of its
// workspace at files of the runner's machine outside it (a text file and
// a SQLite database). Neither a person's download nor a listing's digest
// nor sqlite_query, all now run on the runner, reads through them.
func TestAdversarialRunnerFiles(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runner-files-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	startRunner(t, k.srv.url, runnerKey.Key, "box1")

	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("a file of the runner's machine"), 0o600))
	db := filepath.Join(outside, "secret.db")
	require.NoError(t, os.WriteFile(db, environmenttest.SQLiteDatabase(t, "CREATE TABLE s(x TEXT)", "INSERT INTO s VALUES ('outside row')"), 0o600))

	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "ln -s " + secret + " leak.txt && ln -s " + db + " leak.db"}}}},
		{"tool_calls": []map[string]any{{"name": "sqlite_query", "arguments": map[string]any{"database": "leak.db", "sql": "SELECT x FROM s"}}}},
		{"tool_calls": []map[string]any{{"name": "sqlite_query", "arguments": map[string]any{"database": db, "sql": "SELECT x FROM s"}}}},
		{"tool_calls": []map[string]any{{"name": "lookup", "arguments": map[string]any{}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Reach out.",
		Tools:       []lt.ToolSpec{{Name: "shell"}, {Name: "sqlite_query"}, {Name: "lookup", Type: "function"}},
		Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}},
	}})
	require.NoError(t, err)
	waitForAction(t, admin, s.ID, lt.ActionFunctionCall, "")

	l, err := admin.ListFiles(ctx, s.ID, "", "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromEnvironment, l.Source)
	leak := entryNamed(t, l, "leak.txt")
	require.Equal(t, lt.FileTypeSymlink, leak.Type)
	require.Empty(t, leak.SHA256, "no digest of a file outside the workspace")

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.srv.url+"/v1/sessions/"+s.ID+"/files/leak.txt", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+boot)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "a symlink leaving the workspace is refused on the runner")
	var body struct {
		Error struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	require.Equal(t, "path", body.Error.Field)
	require.NotContains(t, body.Error.Message, outside, "no path of the runner's machine in the answer")

	l2, err := admin.ListEvents(ctx, s.ID, 0, 500)
	require.NoError(t, err)
	n := 0
	for _, ev := range l2.Data {
		if ev.Type != lt.EventToolCompleted && ev.Type != lt.EventToolFailed {
			continue
		}
		var d lt.ToolCompletedData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		if d.Tool != "sqlite_query" {
			continue
		}
		n++
		require.Equal(t, lt.EventToolFailed, ev.Type, "refused: %s", ev.Data)
		require.NotContains(t, string(ev.Data), "outside row", "sqlite_query reads no database outside the workspace")
	}
	require.Equal(t, 2, n)
}
