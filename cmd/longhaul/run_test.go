package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const finishingSpec = `{
  "model": {"provider": "scripted", "name": "t", "script": [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "forty-two"}}],
     "usage": {"input_tokens": 1200, "output_tokens": 80}},
    {"text": "The answer is in out.txt.", "usage": {"input_tokens": 1400, "output_tokens": 20}},
    {"text": "{\"criteria\": [{\"criterion\": \"says where\", \"met\": true, \"reason\": \"out.txt\"}]}",
     "usage": {"input_tokens": 300, "output_tokens": 30}}
  ]},
  "instructions": "Answer.",
  "tools": [{"name": "write_file"}]
}`

func TestRunWithSpecFile(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.json", finishingSpec)
	out := cliOK(t, "run", "--server", s.url, "--agent-spec", spec,
		"--goal", "an answer", "--constraint", "be brief", "--constraint", "no network",
		"--acceptance", "says where", "--budget-usd", "2.5", "What is the answer?")

	require.Contains(t, out, "model.responded")
	require.Contains(t, out, "write_file(out.txt)")
	require.Contains(t, out, "tool.completed")
	require.Contains(t, out, "Output:\nThe answer is in out.txt.\n")
	require.NotContains(t, out, "model.requested", "bookkeeping events are not printed")
	require.Contains(t, out, "1 of 1 criteria met")
	require.Regexp(t, `session ses_\S+ is idle · 3,030 tokens`, out)

	sessions := cliJSON[[]lt.Session](t, "ls", "--server", s.url, "--json")
	require.Len(t, sessions, 1)
	sess := sessions[0]
	require.Equal(t, "an answer", sess.Goal)
	require.Equal(t, []string{"be brief", "no network"}, sess.Constraints)
	require.Equal(t, []string{"says where"}, sess.AcceptanceCriteria)
	require.InDelta(t, 2.5, sess.Budget.MaxCostUSD, 1e-9)
	require.Equal(t, lt.SessionIdle, sess.Status)
}

func TestRunYAMLSpecAndJSONEvents(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.yaml", `
model:
  provider: scripted
  script:
    - text: Done.
`)
	r := cliRun(t, "run", "--server", s.url, "--agent-spec", spec, "--json", "go")
	require.NoError(t, r.err, r.stderr)
	// stdout holds only events, one JSON object per line, gap-free.
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for i, line := range lines {
		var ev lt.Event
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		require.EqualValues(t, i+1, ev.Seq)
	}
	var last lt.Event
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, lt.EventTurnCompleted, last.Type)
	require.Contains(t, r.stderr, "session ses_")
}

func TestRunFailedTurnExitsOne(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	// A 400 from the provider is not retried: the turn fails.
	spec := writeFile(t, "spec.json", `{"model": {"provider": "scripted", "script": [{"error": {"status": 400}}]}}`)
	r := cliRun(t, "run", "--server", s.url, "--agent-spec", spec, "try")
	require.Equal(t, exitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "failed (")
	require.Contains(t, r.stdout, "turn.failed")
}

func TestRunBadSpecFileNamesField(t *testing.T) {
	t.Parallel()
	spec := writeFile(t, "spec.yaml", "model:\n  provider: scripted\ntools:\n  - name: shell\n    efect: read\n")
	r := cliRun(t, "run", "--agent-spec", spec, "go")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, spec+`:5: tools[0].efect: unknown field "efect" (did you mean "effect"?)`)
}

// TestRunFollowsThroughRequiredAction starts a session whose agent calls an
// application function, answers it with `respond` while `run` follows, and
// checks that run prints the hint and then the final output.
func TestRunFollowsThroughRequiredAction(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.json", functionSpec)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	stdout, stderr := newOutBuffer(), newOutBuffer()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "--server", s.url, "--agent-spec", spec, "Look up c-7"}, stdout, stderr)
	}()

	out := stdout.waitFor(t, "longhaul respond ")
	sessionID, actionID := hintIDs(t, out)
	require.True(t, strings.HasPrefix(sessionID, "ses_"), sessionID)
	resp := cliOK(t, "respond", actionID, "--server", s.url, "--output", `{"name": "ACME"}`)
	require.Contains(t, resp, "resolved")

	require.NoError(t, <-done, "stderr: %s", stderr.String())
	out = stdout.String()
	require.Contains(t, out, "Output:\nCustomer c-7 is ACME.")
	require.Contains(t, out, "action.resolved")
}

// hintIDs extracts the session id from run's first note and the action id
// from its respond hint.
func hintIDs(t *testing.T, out string) (string, string) {
	t.Helper()
	var sessionID, actionID string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "session" && f[2] == "started":
			sessionID = f[1]
		case len(f) >= 3 && f[0] == "longhaul" && f[1] == "respond":
			actionID = f[2]
		}
	}
	if sessionID == "" || actionID == "" {
		t.Fatalf("no session note or respond hint in:\n%s", out)
	}
	return sessionID, actionID
}

const functionSpec = `{
  "model": {"provider": "scripted", "script": [
    {"tool_calls": [{"name": "lookup", "arguments": {"id": "c-7"}}]},
    {"text": "Customer c-7 is ACME."}
  ]},
  "tools": [{"name": "lookup", "type": "function", "effect": "read",
             "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}]
}`

// startFunctionSession creates a session that waits for a function call and
// returns its id and the pending action.
func startFunctionSession(t *testing.T, s *testServer) (string, lt.Action) {
	t.Helper()
	spec := writeFile(t, "spec.json", functionSpec)
	id := strings.TrimSpace(cliOK(t, "run", "--server", s.url, "--agent-spec", spec, "--detach", "Look up c-7"))
	require.True(t, strings.HasPrefix(id, "ses_"), id)
	ev := s.waitEvent(t, id, lt.EventActionRequired)
	var d lt.ActionRequiredData
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	return id, d.Action
}
