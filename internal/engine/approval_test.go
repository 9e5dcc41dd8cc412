package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/sandbox"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// approvalHarness is an engine whose tools run in bubblewrap, with a vault
// holding one secret bound to api.example.com.
func approvalHarness(t *testing.T, token string) *harness {
	t.Helper()
	sb, err := sandbox.NewBwrap(sandbox.BwrapOptions{})
	if err != nil {
		t.Skipf("no bubblewrap here: %v", err)
	}
	h := newHarness(t)
	h.sandbox = sb
	h.vault = &fakeVault{secrets: map[string]struct{ value, host string }{"API_TOKEN": {token, "api.example.com"}}}
	h.restart("node-a")
	return h
}

// pendingApproval waits for the session's pending approval.
func pendingApproval(t *testing.T, h *harness, id string) lt.Action {
	t.Helper()
	s := h.waitStatus(id, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	a := s.RequiredActions[0]
	require.Equal(t, lt.ActionApproval, a.Type, "%+v", a)
	return a
}

func decide(t *testing.T, h *harness, id, actionID string, d *lt.Decision) {
	t.Helper()
	_, err := h.eng.DecideAction(context.Background(), id, actionID, d)
	require.NoError(t, err)
}

// upload answers the pending file input with data.
func upload(t *testing.T, h *harness, id, path, data string) {
	t.Helper()
	s := h.waitStatus(id, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	a := s.RequiredActions[0]
	require.Equal(t, lt.ActionInput, a.Type)
	require.Equal(t, path, a.Path)
	_, err := h.eng.WriteFile(context.Background(), id, path, []byte(data), a.ID)
	require.NoError(t, err)
}

// TestApprovalsShowWhatTheyChange: an approval says in plain words what the
// call does, what it can reach in this environment, and shows the workspace
// files it runs or changes — never a secret.
func TestApprovalsShowWhatTheyChange(t *testing.T) {
	const token = "tok-7c2e91f0aa5d4b33"
	h := approvalHarness(t, token)
	ctx := context.Background()
	sp := spec(t, `[
	  {"tool_calls":[{"name":"ask_human","arguments":{"question":"the script?","kind":"file","path":"stats.sh"}}]},
	  {"tool_calls":[{"name":"ask_human","arguments":{"question":"the notes?","kind":"file","path":"notes.md"}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"sh stats.sh | head"}}]},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"notes.md","content":"one\ntwo, revised\nthree\n"}}]},
	  {"tool_calls":[{"name":"edit_file","arguments":{"path":"notes.md","old":"three","new":"three, edited"}}]},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"fresh.txt","content":"hello"}}]},
	  {"text":"done"}]`,
		lt.ToolSpec{Name: "ask_human"}, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "edit_file"})
	sp.Environment = &lt.Environment{Secrets: []string{"API_TOKEN"}}
	sp.Policies = []lt.Policy{
		{Name: "look-first", Tool: "shell", Decision: lt.PolicyAsk},
		{Name: "writes", Tool: "write_file", Decision: lt.PolicyAsk},
		{Name: "edits", Tool: "edit_file", Decision: lt.PolicyAsk},
	}
	s := create(t, h, sp, nil)
	upload(t, h, s.ID, "stats.sh", "echo counting\ncurl -H 'Authorization: Bearer "+token+"' nowhere\nwc -l notes.md\n")
	upload(t, h, s.ID, "notes.md", "one\ntwo\nthree\n")

	// The command: its script shown, its reach in words, no secret.
	a := pendingApproval(t, h, s.ID)
	require.Equal(t, "Run `sh stats.sh | head` in the workspace", a.Summary)
	require.Equal(t, `shell(command="sh stats.sh | head")`, a.Call)
	require.Equal(t, "Runs a command in a sandbox with no network; it can change only the session's workspace (2 files); no secret enters the sandbox", a.Consequence)
	evidence := strings.Join(a.Evidence, "\n")
	require.Contains(t, evidence, "The workspace file stats.sh, which the command runs")
	require.Contains(t, evidence, "echo counting\n")
	require.Contains(t, evidence, "wc -l notes.md")
	require.Contains(t, evidence, "[REDACTED:API_TOKEN]")
	require.NotContains(t, evidence, token)
	decide(t, h, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionReject, Reason: "not now"})

	// A write over a file: the diff against the file now.
	a = pendingApproval(t, h, s.ID)
	require.Equal(t, "Write notes.md (23 bytes)", a.Summary)
	require.Contains(t, a.Consequence, "Changes only the workspace file notes.md")
	evidence = strings.Join(a.Evidence, "\n")
	require.Contains(t, evidence, "--- notes.md\n+++ notes.md\n@@ -1,3 +1,3 @@\n one\n-two\n+two, revised\n three")
	decide(t, h, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionApprove})

	// An edit: the diff of the replacement, against the written file.
	a = pendingApproval(t, h, s.ID)
	require.Equal(t, "Edit notes.md: replace “three” with “three, edited”", a.Summary)
	require.Contains(t, strings.Join(a.Evidence, "\n"), "-three\n+three, edited")
	decide(t, h, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionApprove})

	// A new file: its contents.
	a = pendingApproval(t, h, s.ID)
	require.Contains(t, strings.Join(a.Evidence, "\n"), "A new workspace file fresh.txt (5 bytes):\nhello")
	decide(t, h, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionApprove})
	h.waitStatus(s.ID, lt.SessionIdle)

	// The ledger tells the two writes apart, and holds their whole
	// arguments and outputs.
	effects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	var writes []lt.Effect
	for _, e := range effects {
		if e.Tool == "write_file" {
			writes = append(writes, e)
		}
	}
	require.Len(t, writes, 2)
	require.Equal(t, "Write notes.md (23 bytes)", writes[0].Summary)
	require.Equal(t, "wrote 23 bytes to notes.md", writes[0].Result)
	require.Equal(t, "Write fresh.txt (5 bytes)", writes[1].Summary)
	require.Empty(t, writes[0].Arguments, "a list carries summaries only")
	full, err := h.eng.GetEffect(ctx, s.ID, writes[0].ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"path":"notes.md","content":"one\ntwo, revised\nthree\n"}`, string(full.Arguments))
	require.Contains(t, string(full.Output), `"bytes":23`)
	_, err = h.eng.GetEffect(ctx, s.ID, "eff_nope")
	requireAPIError(t, err, lt.CodeNotFound, "eff_nope")
}

// TestApprovalConsequenceWithNetwork: with hosts to reach, a command's
// consequence names them; a request names where it goes and the secret
// that goes with it.
func TestApprovalConsequenceWithNetwork(t *testing.T) {
	h := approvalHarness(t, "tok-0d9b6f2a61c84e7e")
	sp := spec(t, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"./sync.sh"}}]},
	  {"tool_calls":[{"name":"http_request","arguments":{"method":"POST","url":"https://api.example.com/v1/items?key=x","body":"{}"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "http_request"})
	sp.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"api.example.com"}}, Secrets: []string{"API_TOKEN"}}
	sp.Policies = []lt.Policy{{Name: "look-first", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)

	a := pendingApproval(t, h, s.ID)
	require.Equal(t, "Runs a command in a sandbox that can reach only api.example.com; it can change the session's workspace (empty) and send what it reads there to those hosts; no secret enters the sandbox; it is irreversible: it cannot be undone, and may not be repeated safely", a.Consequence)
	decide(t, h, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionReject, Reason: "no"})

	a = pendingApproval(t, h, s.ID)
	require.Equal(t, "POST to api.example.com/v1/items?…", a.Summary)
	require.Equal(t, "Sends a POST request to api.example.com from the server, outside the sandbox; the secret API_TOKEN (bound to that host) goes with it; it is irreversible: it cannot be undone, and may not be repeated safely", a.Consequence)
	decide(t, h, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionReject, Reason: "no"})
	h.waitStatus(s.ID, lt.SessionIdle)
}
