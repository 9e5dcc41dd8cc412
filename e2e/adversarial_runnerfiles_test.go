package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAdversarialRunnerFiles: a model on a runner points symlinks of its
// workspace at files of the runner's machine outside it (a text file and
// a SQLite database). Neither a person's download nor a listing's digest
// nor sqlite_query, all now run on the runner, reads through them (a
// database inside the runner's workspace, which the server's copy lacks,
// is read). It also plants symlinks inside the workspace (notes.md to
// scripts/deploy.sh, linked to scripts): a person's upload or delete
// through them is refused, naming path, and deploy.sh is untouched.
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
	// The model copies this one into its workspace: only the runner's
	// workspace holds it.
	inside := filepath.Join(t.TempDir(), "inside.db")
	require.NoError(t, os.WriteFile(inside, environmenttest.SQLiteDatabase(t, "CREATE TABLE r(x TEXT)", "INSERT INTO r VALUES ('runner row')"), 0o600))
	plant := "ln -s " + secret + " leak.txt && ln -s " + db + " leak.db && cp " + inside + " inside.db" +
		" && mkdir scripts && echo deploy > scripts/deploy.sh && ln -s scripts/deploy.sh notes.md && ln -s scripts linked"

	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": plant}}}},
		{"tool_calls": []map[string]any{{"name": "sqlite_query", "arguments": map[string]any{"database": "leak.db", "sql": "SELECT x FROM s"}}}},
		{"tool_calls": []map[string]any{{"name": "sqlite_query", "arguments": map[string]any{"database": db, "sql": "SELECT x FROM s"}}}},
		{"tool_calls": []map[string]any{{"name": "sqlite_query", "arguments": map[string]any{"database": "inside.db", "sql": "SELECT x FROM r"}}}},
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

	for _, p := range []string{"notes.md", "linked/deploy.sh", "linked/new.txt"} {
		_, err := admin.PutFile(ctx, s.ID, p, []byte("a person's notes"), "")
		var apiErr *client.APIError
		require.ErrorAs(t, err, &apiErr, p)
		require.Equal(t, http.StatusBadRequest, apiErr.Status, "a person's upload through a planted symlink is refused: %s", p)
		require.Equal(t, "path", apiErr.Field, p)
	}
	_, err = admin.DeleteFile(ctx, s.ID, "linked/deploy.sh")
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.Status, "a person's delete through a planted symlink is refused")
	require.Equal(t, "path", apiErr.Field)
	deploy, err := admin.GetFile(ctx, s.ID, "", "scripts/deploy.sh")
	require.NoError(t, err)
	require.Equal(t, "deploy\n", string(deploy), "nothing was written through the links")
	l, err = admin.ListFiles(ctx, s.ID, "", "")
	require.NoError(t, err)
	require.Equal(t, lt.FileTypeSymlink, entryNamed(t, l, "notes.md").Type, "the link is still a link")

	l2, err := admin.ListEvents(ctx, s.ID, 0, 500)
	require.NoError(t, err)
	n, ranOnRunner := 0, false
	for _, ev := range l2.Data {
		if ev.Type != lt.EventToolCompleted && ev.Type != lt.EventToolFailed {
			continue
		}
		var d lt.ToolCompletedData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		if d.Tool != "sqlite_query" {
			continue
		}
		if strings.Contains(string(ev.Data), "runner row") {
			require.Equal(t, lt.EventToolCompleted, ev.Type)
			ranOnRunner = true
			continue
		}
		n++
		require.Equal(t, lt.EventToolFailed, ev.Type, "refused: %s", ev.Data)
		require.NotContains(t, string(ev.Data), "outside row", "sqlite_query reads no database outside the workspace")
	}
	require.Equal(t, 2, n)
	require.True(t, ranOnRunner, "sqlite_query read the database only the runner's workspace holds")
}
