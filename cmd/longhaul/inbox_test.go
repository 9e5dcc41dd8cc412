package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// startSession starts a detached session with the agent spec and waits until
// it requires an action; it returns the session.
func startSession(t *testing.T, s *testServer, spec, input string, extra ...string) lt.Session {
	t.Helper()
	path := writeFile(t, "spec.json", spec)
	args := append([]string{"run", "--server", s.url, "--agent-spec", path, "--detach"}, extra...)
	id := strings.TrimSpace(cliOK(t, append(args, input)...))
	require.True(t, strings.HasPrefix(id, "ses_"), id)
	s.waitEvent(t, id, lt.EventActionRequired)
	sess := cliJSON[lt.Session](t, "show", id, "--server", s.url, "--json")
	require.Equal(t, lt.SessionRequiresAction, sess.Status)
	require.Len(t, sess.RequiredActions, 1)
	return sess
}

// approvalSpec writes notes.md, under a policy that asks a person first.
const approvalSpec = `{
  "model": {"provider": "scripted", "script": [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "draft <1>"}}]},
    {"text": "Notes written."}
  ]},
  "tools": [{"name": "write_file"}],
  "policies": [{"name": "review-writes", "tool": "write_file", "decision": "ask", "reason": "a person reads every write"}]
}`

// questionSpec asks a person a question with two choices.
const questionSpec = `{
  "model": {"provider": "scripted", "script": [
    {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which quarter?", "choices": ["Q3", "Q4 (draft)"]}}]},
    {"text": "Using the chosen quarter."}
  ]},
  "tools": [{"name": "ask_human"}]
}`

func TestInboxShowsFunctionCallsAcrossSessions(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	first := startSession(t, s, functionSpec, "Look up c-7")
	second := startSession(t, s, strings.Replace(functionSpec, `"c-7"`, `"c-8"`, 1), "Look up c-8")
	a1, a2 := first.RequiredActions[0], second.RequiredActions[0]

	out := cliOK(t, "inbox", "--server", s.url)
	require.Contains(t, out, "2 pending actions.")
	require.Less(t, strings.Index(out, a1.ID), strings.Index(out, a2.ID), "oldest first")
	require.Contains(t, out, "Session:      "+first.ID)
	require.Contains(t, out, "Tool:         lookup")
	require.Contains(t, out, "Arguments:    {\n                  \"id\": \"c-7\"\n                }", "the exact arguments, pretty-printed")
	require.Contains(t, out, "SHA-256:      "+a1.ArgumentsSHA256)
	require.Contains(t, out, "Idem. key:    "+a1.IdempotencyKey)
	require.Contains(t, out, "Expires:      never")
	require.Contains(t, out, "longhaul respond "+a1.ID+" --output JSON")

	all := cliJSON[[]lt.Action](t, "inbox", "--server", s.url, "--json")
	require.Len(t, all, 2)
	require.Equal(t, a1.ID, all[0].ID)
	require.JSONEq(t, string(a1.Arguments), string(all[0].Arguments))
	require.Equal(t, a1.ArgumentsSHA256, all[0].ArgumentsSHA256)
	only := cliJSON[[]lt.Action](t, "inbox", "--server", s.url, "--json", "--session", second.ID)
	require.Len(t, only, 1)
	require.Equal(t, a2.ID, only[0].ID)
	require.Equal(t, "No pending actions.\n", cliOK(t, "inbox", "--server", s.url, "--type", "approval"))

	r := cliRun(t, "inbox", "--server", s.url, "--type", "email")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `--type "email": want one of approval, function_call, input, in_doubt, budget`)
	r = cliRun(t, "inbox", "--server", s.url, "--session", "ses_missing")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "not_found")

	// One action by its id; once answered it shows its resolution and no
	// longer the commands that decide it.
	out = cliOK(t, "action", a2.ID, "--server", s.url)
	require.Contains(t, out, a2.ID+"  function_call  pending")
	require.Contains(t, out, "\"id\": \"c-8\"")
	cliOK(t, "respond", a2.ID, "--server", s.url, "--output", `{"name": "ACME"}`)
	out = cliOK(t, "action", a2.ID, "--server", s.url)
	require.Contains(t, out, a2.ID+"  function_call  resolved")
	require.Contains(t, out, "Resolved:")
	require.Contains(t, out, "Resolution:   output {\"name\":\"ACME\"}")
	require.NotContains(t, out, "Decide:")
	got := cliJSON[lt.Action](t, "action", a2.ID, "--server", s.url, "--json")
	require.Equal(t, lt.ActionResolved, got.Status)
	r = cliRun(t, "action", "act_missing", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    not_found (HTTP 404)")

	// Commands for other action types say which command fits.
	r = cliRun(t, "approve", a1.ID, "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "action "+a1.ID+" is of type function_call; decide it with: longhaul respond "+a1.ID+" --output JSON")
	r = cliRun(t, "answer", a1.ID, "ACME", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	r = cliRun(t, "stop", a1.ID, "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "longhaul cancel "+first.ID)
}

func TestApproveBindsToTheArgumentsShown(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	sess := startSession(t, s, approvalSpec, "write notes")
	act := sess.RequiredActions[0]
	require.Equal(t, lt.ActionApproval, act.Type)

	out := cliOK(t, "inbox", "--server", s.url, "--type", "approval")
	require.Contains(t, out, "1 pending action.")
	require.Contains(t, out, act.ID+"  approval  pending")
	require.Contains(t, out, "Tool:         write_file")
	require.Contains(t, out, "\"content\": \"draft <1>\",\n                  \"path\": \"notes.md\"")
	require.Contains(t, out, "SHA-256:      "+act.ArgumentsSHA256)
	require.Contains(t, out, "Asked by:     policy review-writes")
	require.Contains(t, out, "longhaul approve "+act.ID+"\n")
	require.Contains(t, out, "longhaul reject "+act.ID+" --reason TEXT")

	// Bad input is refused before anything is sent.
	for _, edit := range []string{`[1, 2]`, `"text"`, `{"path": `, ``} {
		r := cliRun(t, "approve", act.ID, "--edit", edit, "--server", s.url)
		require.Equal(t, exitUsage, r.code, "--edit %s", edit)
		require.Contains(t, r.stderr, "--edit", "--edit %s", edit)
	}
	r := cliRun(t, "approve", act.ID, "--edit", `[1]`, "--server", s.url)
	require.Contains(t, r.stderr, "--edit must be a JSON object of the tool's arguments, got an array")
	r = cliRun(t, "approve", act.ID, "--max-cost", "5", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--max-cost goes only with budget actions")
	r = cliRun(t, "reject", act.ID, "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--reason is required")
	r = cliRun(t, "answer", act.ID, "yes", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "decide it with: longhaul approve "+act.ID)
	require.Equal(t, lt.ActionPending, cliJSON[lt.Action](t, "action", act.ID, "--server", s.url, "--json").Status)

	// Approve with edited arguments: the call runs with them.
	out = cliOK(t, "approve", act.ID, "--edit", `{"path": "notes.md", "content": "final"}`, "--server", s.url)
	require.Contains(t, out, "Action "+act.ID+" (approval write_file) of session "+sess.ID+" is resolved: approve with edited arguments")
	s.waitEvent(t, sess.ID, lt.EventTurnCompleted)
	got := cliJSON[lt.Action](t, "action", act.ID, "--server", s.url, "--json")
	var d lt.Decision
	require.NoError(t, json.Unmarshal(got.Resolution, &d))
	require.Equal(t, act.ArgumentsSHA256, d.ArgumentsSHA256, "the approval names the hash of the arguments the person saw")
	require.JSONEq(t, `{"path": "notes.md", "content": "final"}`, string(d.Arguments))
	out = cliOK(t, "action", act.ID, "--server", s.url)
	require.Contains(t, out, "Resolution:   approve\n")
	require.Contains(t, out, `"content": "final"`)
}

func TestApproveRejectAndStopApprovals(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)

	// Plain approve: bound to the fetched hash; the turn completes.
	sess := startSession(t, s, approvalSpec, "write notes")
	act := sess.RequiredActions[0]
	out := cliOK(t, "approve", act.ID, "--server", s.url)
	require.Contains(t, out, "is resolved: approve.")
	s.waitEvent(t, sess.ID, lt.EventTurnCompleted)
	var d lt.Decision
	require.NoError(t, json.Unmarshal(cliJSON[lt.Action](t, "action", act.ID, "--server", s.url, "--json").Resolution, &d))
	require.Equal(t, lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: act.ArgumentsSHA256}, d)
	// Approving again is harmless; rejecting now is a conflict.
	cliOK(t, "approve", act.ID, "--server", s.url)
	r := cliRun(t, "reject", act.ID, "--reason", "too late", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    conflict (HTTP 409)")

	// Reject: the reason goes back to the model, and the turn goes on.
	sess = startSession(t, s, approvalSpec, "write notes")
	act = sess.RequiredActions[0]
	out = cliOK(t, "reject", act.ID, "--reason", "not now", "--server", s.url)
	require.Contains(t, out, "is resolved: reject: not now.")
	s.waitEvent(t, sess.ID, lt.EventTurnCompleted)

	// Stop: the turn ends.
	sess = startSession(t, s, approvalSpec, "write notes")
	act = sess.RequiredActions[0]
	resolved := cliJSON[lt.Action](t, "stop", act.ID, "--reason", "wrong file", "--json", "--server", s.url)
	require.Equal(t, lt.ActionResolved, resolved.Status)
	s.waitEvent(t, sess.ID, lt.EventTurnFailed)
	final := cliJSON[lt.Session](t, "show", sess.ID, "--server", s.url, "--json")
	require.NotNil(t, final.StopReason)
	require.Equal(t, lt.StopStopped, *final.StopReason)
}

func TestAnswerRefusesAChoiceNotOffered(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	sess := startSession(t, s, questionSpec, "which quarter")
	act := sess.RequiredActions[0]
	require.Equal(t, lt.ActionInput, act.Type)

	out := cliOK(t, "inbox", "--server", s.url)
	require.Contains(t, out, "Question:     Which quarter?")
	require.Contains(t, out, "Choices:      1. Q3\n                2. Q4 (draft)")
	require.Contains(t, out, "longhaul answer "+act.ID+" Q3")

	r := cliRun(t, "answer", act.ID, "Q1", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `"Q1" is not one of the choices the agent offered: "Q3", "Q4 (draft)"`)
	r = cliRun(t, "answer", act.ID, " ", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Equal(t, lt.ActionPending, cliJSON[lt.Action](t, "action", act.ID, "--server", s.url, "--json").Status)

	out = cliOK(t, "answer", act.ID, "Q4 (draft)", "--server", s.url)
	require.Contains(t, out, "is resolved: answer: Q4 (draft).")
	s.waitEvent(t, sess.ID, lt.EventTurnCompleted)
}

func TestBudgetShowsAndChangesLimits(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	sess := startSession(t, s, functionSpec, "Look up c-7", "--budget-usd", "5")
	require.Equal(t, lt.Budget{MaxCostUSD: 5}, sess.Budget)

	out := cliOK(t, "budget", sess.ID, "--server", s.url)
	require.Contains(t, out, "Session "+sess.ID+" is requires_action.")
	require.Regexp(t, `(?m)^LIMIT +USED +SOFT +MAX$`, out)
	require.Regexp(t, `(?m)^cost +\$0\.0000 +- +\$5\.0000$`, out)
	require.Regexp(t, `(?m)^model calls +1 +- +-$`, out)

	// Only the flags given change; the others keep their values.
	out = cliOK(t, "budget", sess.ID, "--soft-cost", "2.5", "--max-tokens", "100000", "--max-wall", "72h", "--server", s.url)
	require.Contains(t, out, "Budget of "+sess.ID+" updated (--soft-cost, --max-tokens, --max-wall).")
	require.Regexp(t, `(?m)^cost +\$0\.0000 +\$2\.5000 +\$5\.0000$`, out)
	require.Regexp(t, `(?m)^tokens +\d+ +- +100,000$`, out)
	require.Regexp(t, `(?m)^wall time +\S+ +- +72h00m$`, out)
	got := cliJSON[lt.Session](t, "budget", sess.ID, "--max-tokens", "0", "--json", "--server", s.url)
	require.Equal(t, lt.Budget{MaxCostUSD: 5, SoftCostUSD: 2.5, MaxWallSeconds: 72 * 3600}, got.Budget, "0 removes a limit")

	// The server validates the merged budget, naming the field.
	r := cliRun(t, "budget", sess.ID, "--soft-cost", "9", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   soft_cost_usd")

	for _, args := range [][]string{
		{"--soft-cost", "-1"},
		{"--max-tool-calls", "-3"},
		{"--max-wall", "1500ms"},
		{"--soft-wall", "-1h"},
	} {
		r := cliRun(t, append([]string{"budget", sess.ID, "--server", s.url}, args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, args[0])
	}
}

// TestBudgetSendsOnlyTheFlagsGiven checks the PATCH body itself: a limit
// not on the command line is not sent, so the server keeps it.
func TestBudgetSendsOnlyTheFlagsGiven(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		bodies []string
	)
	created := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(lt.Session{ID: "ses_1", Status: lt.SessionIdle, CreatedAt: created, UpdatedAt: created,
			Budget: lt.Budget{MaxCostUSD: 10, SoftToolCalls: 0, MaxWallSeconds: 5400}})
	}))
	t.Cleanup(srv.Close)

	cliOK(t, "budget", "ses_1", "--max-cost", "10", "--soft-tool-calls", "0", "--max-wall", "90m", "--server", srv.URL)
	cliOK(t, "budget", "ses_1", "--server", srv.URL)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 2)
	method, path, body := splitRequest(bodies[0])
	require.Equal(t, "PATCH", method)
	require.Equal(t, "/v1/sessions/ses_1/budget", path)
	require.JSONEq(t, `{"max_cost_usd": 10, "soft_tool_calls": 0, "max_wall_seconds": 5400}`, body)
	require.Equal(t, "GET /v1/sessions/ses_1 ", bodies[1], "without flags, budget only reads")
}

func splitRequest(s string) (method, path, body string) {
	method, rest, _ := strings.Cut(s, " ")
	path, body, _ = strings.Cut(rest, " ")
	return method, path, body
}

func TestApproveAndStopBudgetActions(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	// Every step lists files and goes on; the soft limit on model calls
	// pauses the session after two calls.
	spec := `{
  "model": {"provider": "scripted", "script": [
    {"tool_calls": [{"name": "list_files", "arguments": {}}]},
    {"tool_calls": [{"name": "list_files", "arguments": {"path": "."}}]},
    {"tool_calls": [{"name": "list_files", "arguments": {}}]},
    {"text": "Done."}
  ]},
  "tools": [{"name": "list_files"}],
  "budget": {"soft_model_calls": 2, "max_model_calls": 10, "max_cost_usd": 3}
}`
	sess := startSession(t, s, spec, "list")
	act := sess.RequiredActions[0]
	require.Equal(t, lt.ActionBudget, act.Type)

	out := cliOK(t, "inbox", "--type", "budget", "--server", s.url)
	require.Contains(t, out, act.ID+"  budget  pending")
	require.Contains(t, out, "Limit:        model_calls: used 2, soft 2, max 10")
	require.Contains(t, out, "Usage:        ")
	require.Regexp(t, `Usage: +≈[0-9,]+ tokens · `, out, "the scripted steps gave no usage: the counts are estimates")
	require.Contains(t, out, "2 model calls")
	require.Contains(t, out, "longhaul approve "+act.ID+" [--soft-cost N --max-cost N ...]")
	require.Contains(t, out, "longhaul stop "+act.ID)

	r := cliRun(t, "approve", act.ID, "--max-cost", "0", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "longhaul budget "+sess.ID+" --max-cost 0")
	r = cliRun(t, "approve", act.ID, "--edit", `{}`, "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--edit goes only with approval actions")
	r = cliRun(t, "reject", act.ID, "--reason", "no", "--server", s.url)
	require.Equal(t, exitUsage, r.code)

	// Approve with new limits: the session's budget merged with the flags.
	out = cliOK(t, "approve", act.ID, "--soft-model-calls", "3", "--max-model-calls", "12", "--server", s.url)
	require.Contains(t, out, "is resolved: approve with budget")
	var d lt.Decision
	require.NoError(t, json.Unmarshal(cliJSON[lt.Action](t, "action", act.ID, "--server", s.url, "--json").Resolution, &d))
	require.Equal(t, &lt.Budget{SoftModelCalls: 3, MaxModelCalls: 12, MaxCostUSD: 3}, d.Budget, "the current budget with the flags")

	// The new soft limit is reached in turn; stop ends the turn.
	deadline := time.Now().Add(testTimeout)
	var next lt.Action
	for {
		pending := cliJSON[[]lt.Action](t, "inbox", "--type", "budget", "--json", "--server", s.url)
		if len(pending) == 1 {
			next = pending[0]
			break
		}
		require.True(t, time.Now().Before(deadline), "no second budget action")
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for an event
	}
	require.Equal(t, 3.0, next.Limit.Used)
	out = cliOK(t, "stop", next.ID, "--server", s.url)
	require.Contains(t, out, "is resolved: stop.")
	s.waitEvent(t, sess.ID, lt.EventTurnFailed)
	final := cliJSON[lt.Session](t, "show", sess.ID, "--server", s.url, "--json")
	require.Equal(t, lt.StopBudgetExceeded, *final.StopReason)
}

func TestRunHintsForApprovals(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := filepath.Join(t.TempDir(), "spec.json")
	require.NoError(t, os.WriteFile(spec, []byte(approvalSpec), 0o600))
	ctx := t.Context()
	stdout, stderr := newOutBuffer(), newOutBuffer()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "--server", s.url, "--agent-spec", spec, "write notes"}, stdout, stderr)
	}()
	out := stdout.waitFor(t, "longhaul approve ")
	require.Contains(t, out, "write_file")
	var actionID string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "longhaul" && f[1] == "approve" {
			actionID = f[2]
		}
	}
	require.True(t, strings.HasPrefix(actionID, "act_"), out)
	cliOK(t, "approve", actionID, "--server", s.url)
	require.NoError(t, <-done, "stderr: %s", stderr.String())
	require.Contains(t, stdout.String(), "Notes written.")
}
