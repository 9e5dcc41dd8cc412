package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Taking over the workspace (files.go, workspacesync.go, personnote.go).

func sum256(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// requireFieldError checks an *apierror.Error's status code and field.
func requireFieldError(t *testing.T, err error, code, field string) {
	t.Helper()
	require.Error(t, err)
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae, "%v", err)
	require.Equal(t, code, ae.Code, "%v", err)
	require.Equal(t, field, ae.Field, "%v", err)
}

func readAll(t *testing.T, rc io.ReadCloser) string {
	t.Helper()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

// personChanged returns the workspace.changed events of a session.
func personChanged(t *testing.T, h *harness, id string) []lt.WorkspaceChange {
	t.Helper()
	var out []lt.WorkspaceChange
	for _, ev := range events(t, h, id, lt.EventWorkspaceChanged) {
		out = append(out, data[lt.WorkspaceChange](t, ev))
	}
	return out
}

// lastStepText is the text of the last message of the latest step call.
func lastStepMessages(p *planProvider) []model.Message {
	steps := p.stepRequests()
	return steps[len(steps)-1].msgs
}

// TestPersonWriteWhileRequiresAction: while the session waits for a
// person, a person writes a new file and edits one the agent wrote; each
// change is journaled (by person, path, sha256, size, the previous sha256)
// with its content as a blob before the answer; the next model call is
// told which files changed; the next checkpoint's snapshot holds them.
func TestPersonWriteWhileRequiresAction(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("write_file", `{"path":"draft.md","content":"v1"}`),
		call("lookup", `{}`),
		call("read_file", `{"path":"notes/hint.md"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{
		{Name: "write_file"}, {Name: "read_file"}, {Name: "lookup", Type: "function"},
	}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)

	l, err := h.eng.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.True(t, l.Writable)
	require.Len(t, l.Entries, 1)
	require.Equal(t, lt.FileEntry{Name: "draft.md", Path: "draft.md", Type: "file", Size: 2, SHA256: sum256("v1"), Mode: "0644", ModTime: l.Entries[0].ModTime}, l.Entries[0])

	ch, err := h.eng.WriteFile(ctx, s.ID, "notes/hint.md", []byte("use the staging database"), "")
	require.NoError(t, err)
	require.Equal(t, lt.ChangedByPerson, ch.By)
	require.Equal(t, "notes/hint.md", ch.Path)
	require.Equal(t, sum256("use the staging database"), ch.SHA256)
	require.EqualValues(t, len("use the staging database"), ch.Size)
	require.Empty(t, ch.PreviousSHA256)
	edit, err := h.eng.WriteFile(ctx, s.ID, "./draft.md", []byte("v2 by a person"), "")
	require.NoError(t, err)
	require.Equal(t, sum256("v1"), edit.PreviousSHA256)
	again, err := h.eng.WriteFile(ctx, s.ID, "draft.md", []byte("v2 by a person"), "")
	require.NoError(t, err)
	require.True(t, again.Unchanged, "the same bytes again change nothing")

	// Journaled, with the content as a blob, before the answer.
	changes := personChanged(t, h, s.ID)
	require.Len(t, changes, 2)
	require.Equal(t, "notes/hint.md", changes[0].Path)
	require.Equal(t, lt.WorkspaceWrite, changes[0].Op)
	require.Equal(t, ch.SHA256, changes[0].SHA256)
	require.Equal(t, "draft.md", changes[1].Path)
	evs := events(t, h, s.ID, lt.EventWorkspaceChanged)
	require.Equal(t, ch.Seq, evs[0].Seq)
	blob, err := h.store.BlobGet(ctx, ch.SHA256)
	require.NoError(t, err)
	require.Equal(t, "use the staging database", string(blob))
	fe, rc, err := h.eng.OpenFile(ctx, s.ID, "draft.md")
	require.NoError(t, err)
	require.Equal(t, "v2 by a person", readAll(t, rc))
	require.Equal(t, sum256("v2 by a person"), fe.SHA256)
	st := h.state(s.ID)
	require.Len(t, st.PersonChanges, 2)

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	// The call after the change was told, in a person's message, and the
	// model read the file.
	steps := p.stepRequests()
	require.Len(t, steps, 4)
	told := steps[2].msgs[len(steps[2].msgs)-1]
	require.Equal(t, model.RoleUser, told.Role)
	require.Contains(t, told.Text, "A person changed files in the workspace")
	require.Contains(t, told.Text, "wrote notes/hint.md (24 bytes, sha256 "+ch.SHA256+")")
	require.Contains(t, told.Text, "wrote draft.md")
	for _, m := range steps[1].msgs {
		require.NotContains(t, m.Text, "A person changed files", "not before the change")
	}
	// Told once: the later call has it in its place, not again at the end.
	last := steps[3].msgs
	require.NotContains(t, last[len(last)-1].Text, "A person changed files")
	n := 0
	for _, m := range last {
		if strings.Contains(m.Text, "A person changed files") {
			n++
		}
	}
	require.Equal(t, 1, n)
	require.Contains(t, last[len(last)-1].Text, "use the staging database", "read_file saw the person's file")

	// The next checkpoint's snapshot holds the changes; none is pending.
	cps, err := h.eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	cp := cps[len(cps)-1]
	_, rc, err = h.eng.OpenCheckpointFile(ctx, s.ID, cp.ID, "notes/hint.md")
	require.NoError(t, err)
	require.Equal(t, "use the staging database", readAll(t, rc))
	_, rc, err = h.eng.OpenCheckpointFile(ctx, s.ID, cp.ID, "draft.md")
	require.NoError(t, err)
	require.Equal(t, "v2 by a person", readAll(t, rc))
	require.Empty(t, h.state(s.ID).PersonChanges)
	checkJournal(t, h.store, s.ID)
}

// TestPersonWriteWhileRunningIs409: a person cannot change the workspace
// of a running session: 409, and nothing is written or journaled.
func TestPersonWriteWhileRunningIs409(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"delay_ms":600000,"text":"never"}]`), nil)
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	_, err := h.eng.WriteFile(ctx, s.ID, "intruder.txt", []byte("x"), "")
	requireAPIError(t, err, lt.CodeConflict, "is running")
	_, err = h.eng.DeleteFile(ctx, s.ID, "intruder.txt")
	requireAPIError(t, err, lt.CodeConflict, "is running")
	require.NoFileExists(t, filepath.Join(h.dir, "workspaces", s.ID, "intruder.txt"))
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChanged))
	// Reads work while it runs.
	_, err = h.eng.ListFiles(ctx, s.ID, ".")
	require.NoError(t, err)
	cancelNow(t, h, s.ID)
	requireCancelled(t, h, s.ID)
	// A cancelled session is not writable either.
	_, err = h.eng.WriteFile(ctx, s.ID, "intruder.txt", []byte("x"), "")
	requireAPIError(t, err, lt.CodeConflict, "is cancelled")
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChanged))
	_, err = h.eng.WriteFile(ctx, "ses_unknown", "a.txt", []byte("x"), "")
	requireAPIError(t, err, lt.CodeNotFound, "ses_unknown")
}

// TestPersonPathsAreConfined: paths that climb out, are absolute, or go
// through a symlink (one leading out, or even one staying inside) are 400s
// naming path, for reads and writes; nothing is written outside and
// nothing is journaled. Deleting a symlink removes the link, never its
// target.
func TestPersonPathsAreConfined(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"sub/inner.txt","content":"inner"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "write_file"}), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "out")))
	require.NoError(t, os.Symlink("../../"+filepath.Base(outside), filepath.Join(ws, "outrel")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "secret-link")))
	require.NoError(t, os.Symlink("sub", filepath.Join(ws, "in")))

	for _, p := range []string{"../evil.txt", "sub/../../evil.txt", "/tmp/evil.txt", "out/evil.txt", "outrel/evil.txt", "in/evil.txt", "secret-link", "out/secret.txt", "", ".", "sub"} {
		_, err := h.eng.WriteFile(ctx, s.ID, p, []byte("evil"), "")
		requireFieldError(t, err, lt.CodeInvalidRequest, "path")
	}
	for _, p := range []string{"../evil.txt", "/etc/passwd", "out/secret.txt", "outrel/secret.txt", "secret-link"} {
		_, _, err := h.eng.OpenFile(ctx, s.ID, p)
		requireFieldError(t, err, lt.CodeInvalidRequest, "path")
		_, err = h.eng.DeleteFile(ctx, s.ID, p+"/x")
		require.Error(t, err)
	}
	for _, p := range []string{"..", "out", "outrel"} {
		_, err := h.eng.ListFiles(ctx, s.ID, p)
		requireFieldError(t, err, lt.CodeInvalidRequest, "path")
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing was written outside")
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChanged))

	// Inside symlinks are followed for reads (as by the file tools).
	_, rc, err := h.eng.OpenFile(ctx, s.ID, "in/inner.txt")
	require.NoError(t, err)
	require.Equal(t, "inner", readAll(t, rc))
	// A delete of the escaping link removes the link only.
	ch, err := h.eng.DeleteFile(ctx, s.ID, "secret-link")
	require.NoError(t, err)
	require.Equal(t, lt.WorkspaceDelete, ch.Op)
	require.NoFileExists(t, filepath.Join(ws, "secret-link"))
	secret, err := os.ReadFile(filepath.Join(outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(secret))
	_, _, err = h.eng.OpenFile(ctx, s.ID, "missing.txt")
	requireFieldError(t, err, lt.CodeNotFound, "path")
	_, _, err = h.eng.OpenFile(ctx, s.ID, "sub")
	requireFieldError(t, err, lt.CodeInvalidRequest, "path")
}

// TestPersonDelete: a person deletes a file of an idle session; the
// delete is journaled, a second one is a 404, and the next turn's first
// model call is told.
func TestPersonDelete(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("write_file", `{"path":"old.txt","content":"stale"}`),
		{Text: "first done"},
		{Text: "second done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{{Name: "write_file"}}}, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	ch, err := h.eng.DeleteFile(ctx, s.ID, "old.txt")
	require.NoError(t, err)
	require.Equal(t, lt.WorkspaceChange{By: "person", Op: "delete", Path: "old.txt", PreviousSHA256: sum256("stale"), Seq: ch.Seq}, *ch)
	require.NoFileExists(t, filepath.Join(h.dir, "workspaces", s.ID, "old.txt"))
	_, err = h.eng.DeleteFile(ctx, s.ID, "old.txt")
	requireFieldError(t, err, lt.CodeNotFound, "path")
	_, err = h.eng.DeleteFile(ctx, s.ID, ".")
	requireFieldError(t, err, lt.CodeInvalidRequest, "path")
	require.Len(t, personChanged(t, h, s.ID), 1)

	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	msgs := lastStepMessages(p)
	require.Contains(t, msgs[len(msgs)-1].Text, "- deleted old.txt")
	require.Equal(t, "again", msgs[len(msgs)-2].Text, "after the turn's input")
	checkJournal(t, h.store, s.ID)
}

// TestCheckpointSnapshotRead: a checkpoint's snapshot is listed and read
// as it was, whatever the workspace holds now; unknown checkpoints and
// paths are 404s, a directory read a 400.
func TestCheckpointSnapshotRead(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"d/a.txt","content":"one"}}]},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"d/a.txt","content":"two"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "write_file"}), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	cps, err := h.eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	first := cps[0]
	require.Equal(t, 1, first.Step)

	root, err := h.eng.ListCheckpointFiles(ctx, s.ID, first.ID, "")
	require.NoError(t, err)
	require.Equal(t, first.ID, root.CheckpointID)
	require.False(t, root.Writable)
	require.Len(t, root.Entries, 1)
	require.Equal(t, "dir", root.Entries[0].Type)
	d, err := h.eng.ListCheckpointFiles(ctx, s.ID, first.ID, "d")
	require.NoError(t, err)
	require.Equal(t, []lt.FileEntry{{Name: "a.txt", Path: "d/a.txt", Type: "file", Size: 3, SHA256: sum256("one"), Mode: "0644"}}, d.Entries)
	fe, rc, err := h.eng.OpenCheckpointFile(ctx, s.ID, first.ID, "d/a.txt")
	require.NoError(t, err)
	require.Equal(t, "one", readAll(t, rc))
	require.Equal(t, sum256("one"), fe.SHA256)
	_, rc, err = h.eng.OpenFile(ctx, s.ID, "d/a.txt")
	require.NoError(t, err)
	require.Equal(t, "two", readAll(t, rc), "the live workspace moved on")

	_, _, err = h.eng.OpenCheckpointFile(ctx, s.ID, first.ID, "d/missing.txt")
	requireFieldError(t, err, lt.CodeNotFound, "path")
	_, _, err = h.eng.OpenCheckpointFile(ctx, s.ID, first.ID, "d")
	requireFieldError(t, err, lt.CodeInvalidRequest, "path")
	_, _, err = h.eng.OpenCheckpointFile(ctx, s.ID, first.ID, "../d/a.txt")
	requireFieldError(t, err, lt.CodeInvalidRequest, "path")
	_, err = h.eng.ListCheckpointFiles(ctx, s.ID, "ckpt_unknown", "")
	requireAPIError(t, err, lt.CodeNotFound, "ckpt_unknown")
}

// TestInputActionAskingForAFile: ask_human with kind "file" raises an
// input action naming the path; a decision in words or an upload to
// another path is a 409; the upload to that path resolves it in the same
// append, and the agent goes on with the file.
func TestInputActionAskingForAFile(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("ask_human", `{"question":"Please upload the customer list","kind":"file","path":"in/customers.csv"}`),
		call("read_file", `{"path":"in/customers.csv"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{{Name: "ask_human"}, {Name: "read_file"}}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	a := s.RequiredActions[0]
	require.Equal(t, lt.ActionInput, a.Type)
	require.Equal(t, lt.InputFile, a.Kind)
	require.Equal(t, "in/customers.csv", a.Path)

	_, err := h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Answer: "here"})
	requireAPIError(t, err, lt.CodeConflict, "asks for a file")
	_, err = h.eng.WriteFile(ctx, s.ID, "other.csv", []byte("x"), a.ID)
	requireAPIError(t, err, lt.CodeConflict, `asks for the file "in/customers.csv"`)
	_, err = h.eng.WriteFile(ctx, s.ID, "in/customers.csv", []byte("x"), "act_unknown")
	requireAPIError(t, err, lt.CodeConflict, "not a pending action")
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChanged))

	content := "name,email\nada,ada@example.com\n"
	ch, err := h.eng.WriteFile(ctx, s.ID, "in/customers.csv", []byte(content), a.ID)
	require.NoError(t, err)
	require.Equal(t, a.ID, ch.ActionID)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	resolved := events(t, h, s.ID, lt.EventActionResolved)
	require.Len(t, resolved, 1)
	require.Equal(t, ch.Seq+1, resolved[0].Seq, "resolved in the append of the change")
	steps := p.stepRequests()
	require.Len(t, steps, 3)
	second := steps[1].msgs
	require.Contains(t, second[len(second)-2].Text, sum256(content), "the ask_human result names the upload")
	require.Contains(t, steps[2].msgs[len(steps[2].msgs)-1].Text, "ada@example.com")
	_, err = h.eng.WriteFile(ctx, s.ID, "in/customers.csv", []byte("y"), a.ID)
	requireAPIError(t, err, lt.CodeConflict, "not a pending action")
	checkJournal(t, h.store, s.ID)
}

// TestPersonChangeReachesAnotherNode: the change is made through another
// node (its own workspaces, no copy of the session's), which restores the
// last snapshot, applies the change and journals it; the node that ran the
// session, whose copy does not hold the change, restores and applies it
// before its next tool call: the change is never lost.
func TestPersonChangeReachesAnotherNode(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("write_file", `{"path":"a.txt","content":"agent"}`),
		call("lookup", `{}`),
		call("read_file", `{"path":"b.txt"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{
		{Name: "write_file"}, {Name: "read_file"}, {Name: "lookup", Type: "function"},
	}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)

	other, err := engine.New(h.store, &engine.Config{
		WorkspaceRoot: filepath.Join(t.TempDir(), "workspaces"), NodeID: "node-b", Clock: h.clock,
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)},
	})
	require.NoError(t, err)
	l, err := other.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.Len(t, l.Entries, 1, "node-b restored the last snapshot")
	require.Equal(t, "a.txt", l.Entries[0].Name)
	ch, err := other.WriteFile(ctx, s.ID, "b.txt", []byte("from a person on node-b"), "")
	require.NoError(t, err)
	evs := events(t, h, s.ID, lt.EventWorkspaceChanged)
	require.Len(t, evs, 1)
	require.Equal(t, "node-b", h.state(s.ID).WorkspaceNode, "node-b changed it last")
	require.Equal(t, ch.SHA256, sum256("from a person on node-b"))

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	restored := events(t, h, s.ID, lt.EventEnvironmentRestored)
	require.Len(t, restored, 1)
	rd := data[lt.EnvironmentRestoredData](t, restored[0])
	require.Contains(t, rd.Note, "1 change(s) a person made to the workspace since were applied again")
	got, err := os.ReadFile(filepath.Join(h.dir, "workspaces", s.ID, "b.txt"))
	require.NoError(t, err)
	require.Equal(t, "from a person on node-b", string(got))
	msgs := lastStepMessages(p)
	require.Contains(t, msgs[len(msgs)-1].Text, "from a person on node-b")
	checkJournal(t, h.store, s.ID)
}

// state is the session's stored projection.
func (h *harness) state(id string) *journal.State {
	h.t.Helper()
	row, err := h.store.SessionGet(context.Background(), id)
	require.NoError(h.t, err)
	var st journal.State
	require.NoError(h.t, json.Unmarshal(row.State, &st))
	return &st
}

// TestPersonWriteWhilePaused: a paused session's workspace can be
// changed; after the resume the model is told at its next call.
func TestPersonWriteWhilePaused(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("lookup", `{}`),
		call("read_file", `{"path":"plan.md"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{
		{Name: "read_file"}, {Name: "lookup", Type: "function"},
	}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	_, err := h.eng.PauseSession(ctx, s.ID, &lt.PauseRequest{Reason: "a person takes over"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionPaused)
	ch, err := h.eng.WriteFile(ctx, s.ID, "plan.md", []byte("step 1: ask ops"), "")
	require.NoError(t, err)
	require.Equal(t, "plan.md", ch.Path)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
	require.NoError(t, err)
	_, err = h.eng.ResumeSession(ctx, s.ID, &lt.ResumeRequest{})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	steps := p.stepRequests()
	require.Len(t, steps, 3)
	second := steps[1].msgs
	require.Contains(t, second[len(second)-1].Text, "wrote plan.md (15 bytes, sha256 "+sum256("step 1: ask ops")+")")
	last := steps[2].msgs
	require.Contains(t, last[len(last)-1].Text, "step 1: ask ops")
	checkJournal(t, h.store, s.ID)
}

// TestManyPersonChangesKeepTheCopyCurrent: more changes than the list of a
// copy's snapshots holds leave this node's copy current: the next turn
// runs in it without a restore, and its checkpoint holds every change.
func TestManyPersonChangesKeepTheCopyCurrent(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"a"}}]},{"text":"first"},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"b.txt","content":"b"}}]},{"text":"second"}]`, lt.ToolSpec{Name: "write_file"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	for i := range 20 {
		_, err := h.eng.WriteFile(ctx, s.ID, fmt.Sprintf("p/%02d.txt", i), []byte(fmt.Sprint(i)), "")
		require.NoError(t, err)
	}
	_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	waitEvent(t, h, s.ID, lt.EventTurnCompleted)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost), "the copy was current")
	cps, err := h.eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	l, err := h.eng.ListCheckpointFiles(ctx, s.ID, cps[len(cps)-1].ID, "p")
	require.NoError(t, err)
	require.Len(t, l.Entries, 20)
	require.Empty(t, h.state(s.ID).PersonChanges)
}

// TestPersonWriteQuota: an upload that would take the workspace over its
// quota (environment.disk_mb) is a 413, and nothing is written or
// journaled.
func TestPersonWriteQuota(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"text":"done"}]`)
	sp.Environment = &lt.Environment{DiskMB: 1}
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	// The same node's API, with the sandbox that measures the quota.
	api, err := engine.New(h.store, &engine.Config{
		WorkspaceRoot: filepath.Join(h.dir, "workspaces"), NodeID: "node-a", Clock: h.clock,
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)}, Sandbox: sandbox.NewLocal(),
	})
	require.NoError(t, err)
	_, err = api.WriteFile(ctx, s.ID, "small.txt", []byte("fits"), "")
	require.NoError(t, err)
	_, err = api.WriteFile(ctx, s.ID, "big.bin", make([]byte, 2<<20), "")
	requireAPIError(t, err, lt.CodePayloadTooLarge, "quota")
	require.NoFileExists(t, filepath.Join(h.dir, "workspaces", s.ID, "big.bin"))
	require.Len(t, personChanged(t, h, s.ID), 1)
	_, err = api.WriteFile(ctx, s.ID, "huge.bin", make([]byte, engine.MaxFileBytes+1), "")
	requireAPIError(t, err, lt.CodePayloadTooLarge, "larger than")
}

// TestPersonRevertThroughAnotherNodeIsKept: the agent changed a file in
// the step it parked in (after the last snapshot); a person, through a
// node whose copy is the last snapshot, writes the file back to what that
// snapshot holds. The write is journaled like any other (the journal, not
// a node's copy, says what the workspace is), so the node that runs the
// session next brings its copy up to date and the agent reads the
// person's bytes, not its own.
func TestPersonRevertThroughAnotherNodeIsKept(t *testing.T) {
	twoCalls := model.Response{ToolCalls: []model.ToolCall{
		{Name: "write_file", Arguments: json.RawMessage(`{"path":"a.txt","content":"by the agent"}`)},
		{Name: "lookup", Arguments: json.RawMessage(`{}`)},
	}}
	p := &planProvider{plan: []model.Response{
		call("write_file", `{"path":"a.txt","content":"golden"}`),
		twoCalls,
		call("read_file", `{"path":"a.txt"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{
		{Name: "write_file"}, {Name: "read_file"}, {Name: "lookup", Type: "function"},
	}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	live, err := os.ReadFile(filepath.Join(h.dir, "workspaces", s.ID, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "by the agent", string(live), "the live copy holds the agent's change")

	other, err := engine.New(h.store, &engine.Config{
		WorkspaceRoot: filepath.Join(t.TempDir(), "workspaces"), NodeID: "node-b", Clock: h.clock,
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)},
	})
	require.NoError(t, err)
	ch, err := other.WriteFile(ctx, s.ID, "a.txt", []byte("golden"), "")
	require.NoError(t, err)
	require.False(t, ch.Unchanged, "node-b's copy is not the live one: the write is journaled")
	require.Len(t, personChanged(t, h, s.ID), 1)

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	got, err := os.ReadFile(filepath.Join(h.dir, "workspaces", s.ID, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "golden", string(got), "the person's bytes, not the agent's")
	var read string
	for _, ev := range events(t, h, s.ID, lt.EventToolCompleted) {
		read = string(ev.Data)
	}
	require.Contains(t, read, "golden")
	checkJournal(t, h.store, s.ID)
}

// TestSubagentCannotAskForAFile: a sub-agent works in its root's
// workspace, which no person may change while it runs (nor through the
// sub-agent), so an ask_human of kind file there could never be answered
// and would hold the whole tree: it fails at once, as a tool error the
// sub-agent reads, and the tree goes on.
func TestSubagentCannotAskForAFile(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("ask_human", map[string]any{"question": "Upload the data", "kind": "file", "path": "in/data.csv"})}},
		map[string]any{"text": "went on without it"},
	), "ask_human")
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "get the data"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	s := create(t, h, parent, nil)
	var kid lt.Session
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) { // polling with a deadline
		if kids := children(t, h, s.ID); len(kids) > 0 {
			kid = kids[0]
			if kid.Status == lt.SessionRequiresAction || kid.Status == lt.SessionIdle || kid.Status.Terminal() {
				break
			}
		}
		require.False(t, time.Now().After(deadline), "the sub-agent neither asked nor ended")
	}
	for _, a := range kid.RequiredActions {
		// Were it asked, a person could not give it.
		_, err := h.eng.WriteFile(context.Background(), kid.ID, a.Path, []byte("a,b\n"), a.ID)
		require.NoError(t, err, "a file the sub-agent asks for cannot be uploaded")
	}
	s = h.waitStatus(s.ID, lt.SessionIdle)
	failed := events(t, h, kid.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Contains(t, data[lt.ToolFailedData](t, failed[0]).Error, "sub-agent")
	require.Empty(t, events(t, h, kid.ID, lt.EventActionRequired))
	checkJournal(t, h.store, s.ID)
}

// TestPersonWriteIfMatch: a conditional write is made only while the file
// holds the bytes named; sent again after it was made (an answer lost, the
// client retrying), it changes nothing and is no conflict; a delete naming
// old bytes is refused.
func TestPersonWriteIfMatch(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"v1"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "write_file"}), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	v1 := strconv.Quote(sum256("v1"))
	_, err := h.eng.WriteFileIfMatch(ctx, s.ID, "a.txt", []byte("v2"), "", `"`+sum256("other")+`"`)
	requireFieldError(t, err, lt.CodeConflict, "If-Match")
	ch, err := h.eng.WriteFileIfMatch(ctx, s.ID, "a.txt", []byte("v2"), "", v1)
	require.NoError(t, err)
	require.False(t, ch.Unchanged)
	again, err := h.eng.WriteFileIfMatch(ctx, s.ID, "a.txt", []byte("v2"), "", v1)
	require.NoError(t, err, "the same write sent again")
	require.True(t, again.Unchanged)
	_, err = h.eng.WriteFileIfMatch(ctx, s.ID, "a.txt", []byte("v3"), "", v1)
	requireFieldError(t, err, lt.CodeConflict, "If-Match")
	_, err = h.eng.DeleteFileIfMatch(ctx, s.ID, "a.txt", v1)
	requireFieldError(t, err, lt.CodeConflict, "If-Match")
	_, err = h.eng.WriteFileIfMatch(ctx, s.ID, "new.txt", []byte("x"), "", "*")
	requireFieldError(t, err, lt.CodeConflict, "If-Match")
	_, err = h.eng.DeleteFileIfMatch(ctx, s.ID, "a.txt", "*")
	require.NoError(t, err)
	require.Len(t, personChanged(t, h, s.ID), 2)
	checkJournal(t, h.store, s.ID)
}

// TestPersonPathTooLongIsRefused: a path no file system can hold (a name
// over 255 bytes, a path over 4,095) is a 400 naming path before anything
// is journaled. Journaled, it failed on every restore: the workspace could
// never be made current again, every later read or write of the files
// failed, and so did the session's next turn.
func TestPersonPathTooLongIsRefused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"v1"}}]},{"text":"done"},{"text":"again"}]`,
		lt.ToolSpec{Name: "write_file"}), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	for _, p := range []string{"dir/" + strings.Repeat("x", 256), strings.Repeat("d/", 2048) + "f"} {
		_, err := h.eng.WriteFile(ctx, s.ID, p, []byte("x"), "")
		requireFieldError(t, err, lt.CodeInvalidRequest, "path")
	}
	_, err := h.eng.WriteFile(ctx, s.ID, "dir/"+strings.Repeat("x", 255), []byte("x"), "")
	require.NoError(t, err, "a name of 255 bytes is fine")
	require.Len(t, personChanged(t, h, s.ID), 1)
	_, err = h.eng.ListFiles(ctx, s.ID, "dir")
	require.NoError(t, err)
	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status)
	checkJournal(t, h.store, s.ID)
}
