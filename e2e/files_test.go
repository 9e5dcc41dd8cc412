package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Taking over the workspace in the web UI, in headless Chromium against the
// real binary: a person pauses a session that waits for them, uploads a
// file and edits another in the session page's file browser, resumes it,
// and sees the changes in the timeline; the agent then reads the uploaded
// file, and a checkpoint's snapshot is browsed read-only.

func TestWebUITakeOverWorkspace(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)

	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "write_file", "arguments": map[string]any{"path": "notes.md", "content": "draft by the agent"}}}},
		{"tool_calls": []map[string]any{{"name": "lookup", "arguments": map[string]any{}}}},
		{"tool_calls": []map[string]any{{"name": "read_file", "arguments": map[string]any{"path": "hint.txt"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "work on the notes", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: script},
		Tools: []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"},
			{Name: "lookup", Type: "function", Parameters: json.RawMessage(`{"type":"object","additionalProperties":false}`)}},
	}})
	require.NoError(t, err)
	id := sess.ID
	act := pendingAction(ctx, t, srv, id, "function_call", "lookup")

	// Open the Files tab while the session waits for a person; then pause
	// it with the page's button: the page follows the stream and offers
	// the upload.
	page := b.root
	b.do(page, "open the session's files", navigate(srv.url+"/#/sessions/"+id+"?tab=files"))
	b.waitJS(page, "the listing with the agent's file", `document.querySelector('#files-table tr[data-path="notes.md"]') !== null`)
	b.setValue(page, "#pause-reason", "a person takes over")
	b.click(page, "#pause")
	waitFor(t, browserTimeout, "the session to be paused", func() (bool, error) {
		s, err := srv.api.GetSession(ctx, id)
		return err == nil && s.Status == lt.SessionPaused, err
	})
	b.waitJS(page, "the file browser to allow changes while paused", `(document.querySelector('#files-writable') || {}).dataset?.writable === 'true' && document.querySelector('#files-writable').innerText.includes('paused')`)

	// Upload a file from this machine.
	local := filepath.Join(t.TempDir(), "hint.txt")
	const hint = "Use the staging database, not production."
	require.NoError(t, os.WriteFile(local, []byte(hint), 0o600))
	b.do(page, "choose the file to upload", chromedp.SetUploadFiles(chromedp.CSS("#files-upload-input"), []string{local}))
	b.click(page, "#files-upload-go")
	b.waitJS(page, "the upload's confirmation", `(document.querySelector('#files-ok') || {}).innerText?.includes('Wrote hint.txt')`)
	b.waitJS(page, "hint.txt in the listing", `document.querySelector('#files-table tr[data-path="hint.txt"]') !== null`)

	// Edit the agent's file in place.
	b.click(page, `#files-table tr[data-path="notes.md"] .edit-btn`)
	b.waitJS(page, "the editor with the file", `(document.querySelector('#files-editor-text') || {}).value === 'draft by the agent'`)
	b.setValue(page, "#files-editor-text", "draft by the agent\nreviewed by a person")
	b.click(page, "#files-editor-save")
	b.waitJS(page, "the edit's confirmation", `(document.querySelector('#files-ok') || {}).innerText?.includes('Wrote notes.md')`)
	b.screenshot(page, "files-paused")

	got, err := srv.api.GetFile(ctx, id, "", "hint.txt")
	require.NoError(t, err)
	require.Equal(t, hint, string(got))
	got, err = srv.api.GetFile(ctx, id, "", "notes.md")
	require.NoError(t, err)
	require.Equal(t, "draft by the agent\nreviewed by a person", string(got))

	// Answer the agent's question, resume with the page's button, and
	// watch the timeline.
	_, err = srv.api.DecideAction(ctx, id, act.ID, &lt.Decision{Output: json.RawMessage(`"nothing found"`)})
	require.NoError(t, err)
	b.click(page, `button.tab[data-tab="timeline"]`)
	b.click(page, "#resume")
	s := waitTerminal(ctx, t, srv, id, browserTimeout)
	require.Equal(t, lt.SessionIdle, s.Status)
	b.waitJS(page, "both changes in the timeline", `document.querySelectorAll('#timeline li[data-type="workspace.changed"]').length === 2`)
	items := b.text(page, "#timeline")
	require.Contains(t, items, "Workspace changed by person: wrote hint.txt")
	require.Contains(t, items, "wrote notes.md")
	b.screenshot(page, "files-timeline")

	// The journal has them, by a person, and the agent read the upload.
	var changed []lt.WorkspaceChange
	read := ""
	for _, ev := range journal(ctx, t, srv.api, id) {
		switch ev.Type {
		case lt.EventWorkspaceChanged:
			var d lt.WorkspaceChange
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			changed = append(changed, d)
		case lt.EventToolCompleted:
			read = string(ev.Data)
		}
	}
	require.Len(t, changed, 2)
	require.Equal(t, "person", changed[0].By)
	require.Equal(t, "hint.txt", changed[0].Path)
	require.Equal(t, "notes.md", changed[1].Path)
	require.Contains(t, read, "staging database", "the agent read the person's file")

	// The last checkpoint's snapshot, browsed read-only.
	cps, err := srv.api.ListCheckpoints(ctx, id)
	require.NoError(t, err)
	last := cps.Data[len(cps.Data)-1]
	b.goTo(page, "#/sessions/"+id+"?tab=files")
	b.waitJS(page, "the checkpoint in the source list", fmt.Sprintf(`document.querySelector('#files-source option[value=%q]') !== null`, last.ID))
	b.eval(page, fmt.Sprintf(`(() => { const s = document.querySelector('#files-source'); s.value = %q; s.dispatchEvent(new Event('change')); return true; })()`, last.ID), nil)
	b.waitJS(page, "the snapshot's listing", `(document.querySelector('#files-writable') || {}).innerText?.includes('read only') && document.querySelector('#files-table tr[data-path="hint.txt"]') !== null`)
	require.Zero(t, evalInt(b, page, `document.querySelectorAll('#files-table .edit-btn, #files-table .delete-btn').length`), "a snapshot offers no change")
	require.True(t, evalBool(b, page, `document.querySelector('#files-upload').hidden`), "no upload into a snapshot")
	b.screenshot(page, "files-checkpoint")
	// Leave the page, so its event stream ends before the server does.
	b.do(page, "leave the session page", chromedp.Navigate("about:blank"))
}

func evalInt(b *browser, ctx context.Context, expr string) int {
	var n int
	b.eval(ctx, expr, &n)
	return n
}

func evalBool(b *browser, ctx context.Context, expr string) bool {
	var v bool
	b.eval(ctx, expr, &v)
	return v
}

// TestMultiNodePersonChange: two nodes share PostgreSQL. Node A runs a
// session until it waits for a signal; a person uploads a file and edits
// the agent's through node B, which has no copy of the workspace; B dies;
// A, whose copy lacks both changes, takes the signal: it restores the last
// snapshot, applies the changes again, and the agent reads them. Nothing a
// person changed is lost, whichever node runs the session next.
func TestMultiNodePersonChange(t *testing.T) {
	t.Parallel()
	dsn := pgtest.FreshSchema(t)
	ctx := t.Context()
	c := newCluster(t, dsn, multiLeaseTTL)
	a := c.nodes[c.add()]
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "write_file", "arguments": map[string]any{"path": "notes.md", "content": "by the agent"}}}},
		{"tool_calls": []map[string]any{{"name": "wait_for_signal", "arguments": map[string]any{"name": "go", "timeout_seconds": 3600}}}},
		{"tool_calls": []map[string]any{{"name": "read_file", "arguments": map[string]any{"path": "person.txt"}}}},
		{"tool_calls": []map[string]any{{"name": "read_file", "arguments": map[string]any{"path": "notes.md"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	sess, err := a.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "wait, then read", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: script},
		Tools: []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}, {Name: "wait_for_signal"}},
	}})
	require.NoError(t, err)
	id := sess.ID
	waitFor(t, 60*time.Second, "the session to wait on node A", func() (bool, error) {
		s, err := a.api.GetSession(ctx, id)
		return err == nil && s.Status == lt.SessionWaiting, err
	})

	b := c.nodes[c.add()]
	l, err := b.api.ListFiles(ctx, id, "", "")
	require.NoError(t, err)
	require.Len(t, l.Entries, 1, "node B restored the last snapshot to list it")
	up, err := b.api.PutFile(ctx, id, "person.txt", []byte("uploaded through node B"), "")
	require.NoError(t, err)
	_, err = b.api.PutFile(ctx, id, "notes.md", []byte("edited by a person"), "")
	require.NoError(t, err)
	b.kill()

	_, err = a.api.SendSignal(ctx, id, &lt.SignalRequest{Name: "go"})
	require.NoError(t, err)
	s := waitTerminal(ctx, t, a, id, 60*time.Second)
	require.Equal(t, lt.SessionIdle, s.Status)

	var outputs []string
	restored := ""
	for _, ev := range journal(ctx, t, a.api, id) {
		switch ev.Type {
		case lt.EventToolCompleted:
			outputs = append(outputs, string(ev.Data))
		case lt.EventEnvironmentRestored:
			restored = string(ev.Data)
		case lt.EventWorkspaceChanged:
			require.Equal(t, c.ids[1], ev.WorkerID, "journaled by node B")
		}
	}
	require.Contains(t, restored, "2 change(s) a person made to the workspace since were applied again")
	require.Contains(t, outputs[len(outputs)-2], "uploaded through node B")
	require.Contains(t, outputs[len(outputs)-1], "edited by a person")
	got, err := a.api.GetFile(ctx, id, "", "person.txt")
	require.NoError(t, err)
	require.Equal(t, "uploaded through node B", string(got))
	cps, err := a.api.ListCheckpoints(ctx, id)
	require.NoError(t, err)
	got, err = a.api.GetFile(ctx, id, cps.Data[len(cps.Data)-1].ID, "person.txt")
	require.NoError(t, err)
	require.Equal(t, "uploaded through node B", string(got), "the next checkpoint holds the change")
	sum := sha256.Sum256(got)
	require.Equal(t, up.SHA256, hex.EncodeToString(sum[:]))
}

// TestWebUIFileInputAction: an agent asks a person for a file (ask_human
// of kind file); the inbox card offers an upload to the path it asked
// for, the upload answers the action, and the agent reads the file.
func TestWebUIFileInputAction(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "ask_human", "arguments": map[string]any{
			"question": "Please upload this month's customer list", "kind": "file", "path": "in/customers.csv"}}}},
		{"tool_calls": []map[string]any{{"name": "read_file", "arguments": map[string]any{"path": "in/customers.csv"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "import the customers", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: script},
		Tools: []lt.ToolSpec{{Name: "ask_human"}, {Name: "read_file"}},
	}})
	require.NoError(t, err)
	act := pendingAction(ctx, t, srv, sess.ID, "input", "ask_human")
	require.Equal(t, lt.InputFile, act.Kind)
	require.Equal(t, "in/customers.csv", act.Path)

	page := b.root
	b.do(page, "open the inbox", navigate(srv.url+"/#/inbox"))
	card := fmt.Sprintf(`article[data-action-id=%q]`, act.ID)
	b.waitJS(page, "the file request in the inbox", fmt.Sprintf(`(document.querySelector(%s) || {}).innerText?.includes('in/customers.csv')`, jsString(card+" .file-path")))
	local := filepath.Join(t.TempDir(), "customers.csv")
	require.NoError(t, os.WriteFile(local, []byte("name,email\nada,ada@example.com\n"), 0o600))
	b.do(page, "choose the file", chromedp.SetUploadFiles(chromedp.CSS(card+" input.file-answer"), []string{local}))
	b.click(page, card+` button[data-act="upload"]`)
	b.waitJS(page, "the card's confirmation", fmt.Sprintf(`(document.querySelector(%s) || {}).innerText?.includes('Uploaded in/customers.csv')`, jsString(card)))
	b.screenshot(page, "file-input-answered")

	s := waitTerminal(ctx, t, srv, sess.ID, browserTimeout)
	require.Equal(t, lt.SessionIdle, s.Status)
	var outputs []string
	for _, ev := range journal(ctx, t, srv.api, sess.ID) {
		if ev.Type == lt.EventToolCompleted {
			outputs = append(outputs, string(ev.Data))
		}
	}
	require.Len(t, outputs, 2)
	require.Contains(t, outputs[0], `"path":"in/customers.csv"`, "ask_human returned the upload")
	require.Contains(t, outputs[1], "ada@example.com", "the agent read the person's file")
	b.do(page, "leave the inbox", chromedp.Navigate("about:blank"))
}
