package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestFilesCommands: "longhaul files" lists, downloads (to stdout and to a
// file), uploads and deletes a session's files, reads a checkpoint's
// snapshot, and the changes show in "longhaul events"; a write to a
// running session fails with the server's 409.
func TestFilesCommands(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t)
	ctx := context.Background()
	script := json.RawMessage(`[{"tool_calls":[{"name":"write_file","arguments":{"path":"docs/notes.md","content":"agent notes"}}]},{"text":"done"}]`)
	s, err := srv.client.CreateSession(ctx, &lt.CreateSessionRequest{Input: "notes", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Tools: []lt.ToolSpec{{Name: "write_file"}}}})
	require.NoError(t, err)
	deadline := time.Now().Add(testTimeout)
	for {
		got, err := srv.client.GetSession(ctx, s.ID)
		require.NoError(t, err)
		if got.Status == lt.SessionIdle {
			break
		}
		require.True(t, time.Now().Before(deadline), "session still %s", got.Status)
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}

	require.Regexp(t, `(?m)^dir +docs/$`, cliOK(t, "files", "ls", s.ID, "--server", srv.url))
	out := cliOK(t, "files", "ls", s.ID, "docs", "--server", srv.url)
	require.Regexp(t, `(?m)^file +11 B +[0-9a-f]{12} +docs/notes\.md$`, out)
	l := cliJSON[lt.FileListing](t, "files", "ls", s.ID, "docs", "--json", "--server", srv.url)
	require.Equal(t, "docs/notes.md", l.Entries[0].Path)
	require.True(t, l.Writable)
	require.Equal(t, "agent notes", cliOK(t, "files", "get", s.ID, "docs/notes.md", "--server", srv.url))
	dest := filepath.Join(t.TempDir(), "notes.md")
	cliOK(t, "files", "get", s.ID, "docs/notes.md", "-o", dest, "--server", srv.url)
	got, err := os.ReadFile(dest)
	require.NoError(t, err)
	require.Equal(t, "agent notes", string(got))

	local := writeFile(t, "hint.txt", "use staging")
	require.Regexp(t, `^Wrote docs/hint\.txt \(11 B, sha256 [0-9a-f]{12}\): journaled as event \d+\.\n$`,
		cliOK(t, "files", "put", s.ID, "docs/hint.txt", local, "--server", srv.url))
	require.Equal(t, "use staging", cliOK(t, "files", "get", s.ID, "docs/hint.txt", "--server", srv.url))
	require.Contains(t, cliOK(t, "files", "put", s.ID, "docs/hint.txt", local, "--server", srv.url), "nothing changed")
	require.Regexp(t, `^Deleted docs/notes\.md: journaled as event \d+\.\n$`, cliOK(t, "files", "rm", s.ID, "docs/notes.md", "--server", srv.url))
	r := cliRun(t, "files", "get", s.ID, "docs/notes.md", "--server", srv.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "not_found")
	require.Contains(t, r.stderr, "path")
	r = cliRun(t, "files", "put", s.ID, "../escape.txt", local, "--server", srv.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "leaves the workspace")

	// The checkpoint still holds the deleted file.
	cps, err := srv.client.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	cp := cps.Data[len(cps.Data)-1].ID
	require.Regexp(t, `(?m)docs/notes\.md$`, cliOK(t, "files", "ls", s.ID, "docs", "--checkpoint", cp, "--server", srv.url))
	require.Equal(t, "agent notes", cliOK(t, "files", "get", s.ID, "docs/notes.md", "--checkpoint", cp, "--server", srv.url))

	events := cliOK(t, "events", s.ID, "--server", srv.url)
	require.Contains(t, events, "by person: wrote docs/hint.txt (11 B, sha256 ")
	require.Contains(t, events, "by person: deleted docs/notes.md")

	// A running session refuses.
	slow, err := srv.client.CreateSession(ctx, &lt.CreateSessionRequest{Input: "slow", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"delay_ms":600000,"text":"never"}]`)}}})
	require.NoError(t, err)
	srv.waitEvent(t, slow.ID, lt.EventModelRequested)
	r = cliRun(t, "files", "put", slow.ID, "a.txt", local, "--server", srv.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "conflict")
	_, err = srv.client.Cancel(ctx, slow.ID, &lt.CancelRequest{})
	require.NoError(t, err)
}

// TestFilesPutAnswersAFileAction: "files put --action" answers an input
// action that asks for a file; a path other than the one asked is the
// server's 409.
func TestFilesPutAnswersAFileAction(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t)
	ctx := context.Background()
	script := json.RawMessage(`[{"tool_calls":[{"name":"ask_human","arguments":{"question":"The data, please","kind":"file","path":"data.csv"}}]},{"text":"thanks"}]`)
	s, err := srv.client.CreateSession(ctx, &lt.CreateSessionRequest{Input: "data", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Tools: []lt.ToolSpec{{Name: "ask_human"}}}})
	require.NoError(t, err)
	ev := srv.waitEvent(t, s.ID, lt.EventActionRequired)
	var d struct {
		Action lt.Action `json:"action"`
	}
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	require.Equal(t, "data.csv", d.Action.Path)
	local := writeFile(t, "data.csv", "a,b\n")
	r := cliRun(t, "files", "put", s.ID, "other.csv", local, "--action", d.Action.ID, "--server", srv.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, `asks for the file "data.csv"`)
	require.Contains(t, cliOK(t, "files", "put", s.ID, "data.csv", local, "--action", d.Action.ID, "--server", srv.url), "Wrote data.csv")
	srv.waitEvent(t, s.ID, lt.EventTurnCompleted)
	a, err := srv.client.GetAction(ctx, d.Action.ID)
	require.NoError(t, err)
	require.Equal(t, lt.ActionResolved, a.Status)
}

// TestFilesIfMatch: "files put --if-match" and "files rm --if-match" change
// a file only while it holds the bytes named; else they fail with the
// server's 409 naming If-Match and change nothing.
func TestFilesIfMatch(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t)
	ctx := context.Background()
	script := json.RawMessage(`[{"tool_calls":[{"name":"write_file","arguments":{"path":"notes.md","content":"v1"}}]},{"text":"done"}]`)
	s, err := srv.client.CreateSession(ctx, &lt.CreateSessionRequest{Input: "notes", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Tools: []lt.ToolSpec{{Name: "write_file"}}}})
	require.NoError(t, err)
	deadline := time.Now().Add(testTimeout)
	for {
		got, err := srv.client.GetSession(ctx, s.ID)
		require.NoError(t, err)
		if got.Status == lt.SessionIdle {
			break
		}
		require.True(t, time.Now().Before(deadline), "session still %s", got.Status)
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	read := cliJSON[lt.FileListing](t, "files", "ls", s.ID, "--json", "--server", srv.url).Entries[0].SHA256
	cliOK(t, "files", "put", s.ID, "notes.md", writeFile(t, "a.md", "v2 by one person"), "--if-match", read, "--server", srv.url)
	r := cliRun(t, "files", "put", s.ID, "notes.md", writeFile(t, "b.md", "v2 by another"), "--if-match", read, "--server", srv.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "If-Match")
	r = cliRun(t, "files", "rm", s.ID, "notes.md", "--if-match", read, "--server", srv.url)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "v2 by one person", cliOK(t, "files", "get", s.ID, "notes.md", "--server", srv.url))
	cliOK(t, "files", "rm", s.ID, "notes.md", "--if-match", "*", "--server", srv.url)
}

// TestChangeNotAppliedSummary: "longhaul events" says which person's
// change was not applied and why, not the event's raw JSON.
func TestChangeNotAppliedSummary(t *testing.T) {
	data, err := json.Marshal(lt.WorkspaceChangeNotAppliedData{
		ChangeSeq: 12, Op: lt.WorkspaceWrite, Path: "notes.md", Reason: lt.NotAppliedConflict,
		BasedOn: "sha256:3f2a9c1e77aa00bb11cc22dd33ee44ff", Found: lt.BasedOnAbsent,
	})
	require.NoError(t, err)
	got := eventSummary(lt.Event{Type: lt.EventWorkspaceChangeNotApplied, Data: data})
	require.Equal(t, "change #12 (write notes.md) not applied: conflict, based on sha256:3f2a9c1e77aa, found absent", got)

	data, err = json.Marshal(lt.WorkspaceChangeNotAppliedData{ChangeSeq: 13, Op: lt.WorkspaceWrite, Path: "big.bin", Reason: lt.NotAppliedFailed, Error: "it does not fit"})
	require.NoError(t, err)
	got = eventSummary(lt.Event{Type: lt.EventWorkspaceChangeNotApplied, Data: data})
	require.Equal(t, "change #13 (write big.bin) not applied: it does not fit", got)
}

// TestTreeFindingSummary: a monitor finding the sessions of a tree made
// together lists the other sessions' events after its own.
func TestTreeFindingSummary(t *testing.T) {
	data, err := json.Marshal(lt.MonitorFindingData{
		Detector: "secret_like_egress", Severity: "high", Action: "ask", Summary: "fragments of secret DB_PASSWORD were sent",
		Evidence: []int64{14}, TreeEvidence: []lt.MonitorEvidence{{SessionID: "ses_a", Seq: 9}},
	})
	require.NoError(t, err)
	got := eventSummary(lt.Event{Type: lt.EventMonitorFinding, Data: data})
	require.Equal(t, "secret_like_egress (high, ask): fragments of secret DB_PASSWORD were sent; events 14; in the tree ses_a#9", got)
}
