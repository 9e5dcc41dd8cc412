package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestInspectAndRespondToFunctionCall(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	id, act := startFunctionSession(t, s)
	require.Equal(t, lt.ActionFunctionCall, act.Type)

	// Listing commands, as JSON.
	sessions := cliJSON[[]lt.Session](t, "ls", "--server", s.url, "--json", "--status", "requires_action")
	require.Len(t, sessions, 1)
	require.Equal(t, id, sessions[0].ID)
	require.Empty(t, cliJSON[[]lt.Session](t, "ls", "--server", s.url, "--json", "--status", "idle"))

	sess := cliJSON[lt.Session](t, "show", id, "--server", s.url, "--json")
	require.Equal(t, lt.SessionRequiresAction, sess.Status)
	require.Len(t, sess.RequiredActions, 1)

	actions := cliJSON[[]lt.Action](t, "actions", id, "--server", s.url, "--json", "--status", "pending")
	require.Len(t, actions, 1)
	require.Equal(t, act.ID, actions[0].ID)
	require.Equal(t, "lookup", actions[0].Tool)
	require.JSONEq(t, `{"id":"c-7"}`, string(actions[0].Arguments))

	// Human forms: tables with the ids, and the command that answers.
	out := cliOK(t, "actions", id, "--server", s.url)
	require.Contains(t, out, act.ID)
	require.Contains(t, out, "longhaul respond "+act.ID+" --output")
	out = cliOK(t, "show", id, "--server", s.url)
	require.Contains(t, out, "requires_action")
	require.Contains(t, out, "Required actions:")
	out = cliOK(t, "ls", "--server", s.url)
	require.Regexp(t, `(?m)^ID +STATUS +AGENT`, out)
	require.Contains(t, out, id)

	// Answer the function call; the turn completes.
	out = cliOK(t, "respond", act.ID, "--server", s.url, "--output", `{"name": "ACME"}`)
	require.Contains(t, out, "Action "+act.ID+" (function_call lookup) is resolved")
	s.waitEvent(t, id, lt.EventTurnCompleted)
	sess = cliJSON[lt.Session](t, "show", id, "--server", s.url, "--json")
	require.Equal(t, lt.SessionIdle, sess.Status)

	// The same answer again is harmless; another one is a conflict. The
	// older form with the session's id still works, noted as deprecated.
	r := cliRun(t, "respond", id, act.ID, "--server", s.url, "--output", `{"name": "ACME"}`)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stderr, "'longhaul respond SESSION_ID ACTION_ID' is deprecated")
	r = cliRun(t, "respond", act.ID, "--server", s.url, "--error", "changed my mind")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    conflict (HTTP 409)")

	// The journal, as JSON lines: gap-free from 1, and from --after on.
	events := parseJSONLines(t, cliOK(t, "events", id, "--server", s.url, "--json"))
	for i, ev := range events {
		require.EqualValues(t, i+1, ev.Seq)
	}
	require.Equal(t, lt.EventSessionStatusChanged, events[len(events)-1].Type)
	tail := parseJSONLines(t, cliOK(t, "events", id, "--server", s.url, "--json", "--after", "3"))
	require.Len(t, tail, len(events)-3)
	require.EqualValues(t, 4, tail[0].Seq)
	human := cliOK(t, "events", id, "--server", s.url)
	require.Contains(t, human, "action.required")
	require.Contains(t, human, "turn.completed")
	require.Len(t, strings.Split(strings.TrimSpace(human), "\n"), len(events))

	effects := cliJSON[[]lt.Effect](t, "effects", id, "--server", s.url, "--json")
	require.Len(t, effects, 1)
	require.Equal(t, "lookup", effects[0].Tool)
	require.Equal(t, lt.EffectSucceeded, effects[0].Status)
	require.Contains(t, cliOK(t, "effects", id, "--server", s.url), effects[0].ID)

	resolved := cliJSON[[]lt.Action](t, "actions", id, "--server", s.url, "--json", "--status", "resolved")
	require.Len(t, resolved, 1)
}

func TestArtifactsAndDownload(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.json", `{
	  "model": {"provider": "scripted", "script": [
	    {"tool_calls": [{"name": "write_file", "arguments": {"path": "report.md", "content": "# Report\n"}}]},
	    {"tool_calls": [{"name": "finish", "arguments": {"summary": "done", "artifacts": ["report.md"]}}]}
	  ]},
	  "tools": [{"name": "write_file"}, {"name": "finish"}]
	}`)
	cliOK(t, "run", "--server", s.url, "--agent-spec", spec, "write it")
	sessions := cliJSON[[]lt.Session](t, "ls", "--server", s.url, "--json")
	require.Len(t, sessions, 1)
	id := sessions[0].ID

	arts := cliJSON[[]lt.Artifact](t, "artifacts", id, "--server", s.url, "--json")
	require.Len(t, arts, 1)
	require.Equal(t, "report.md", arts[0].Name)
	require.Contains(t, cliOK(t, "artifacts", id, "--server", s.url), arts[0].ID)

	require.Equal(t, "# Report\n", cliOK(t, "artifact", "get", arts[0].ID, "--server", s.url))
	dst := filepath.Join(t.TempDir(), "copy.md")
	r := cliRun(t, "artifact", "get", arts[0].ID, "-o", dst, "--server", s.url)
	require.NoError(t, r.err)
	require.Contains(t, r.stderr, "Wrote "+dst)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "# Report\n", string(got))
	require.Equal(t, "# Report\n", cliOK(t, "get", arts[0].ID, "--server", s.url))

	require.Contains(t, cliOK(t, "review", id, "--accept", "--note", "fine", "--server", s.url), "Accepted "+id+" (artifact "+arts[0].ID+")")
	sess := cliJSON[lt.Session](t, "show", id, "--server", s.url, "--json")
	require.True(t, sess.Review.Accepted)
	r = cliRun(t, "review", id, "--server", s.url)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "--accept")
}

func TestCancelAndFollowEvents(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	id, _ := startFunctionSession(t, s)

	// Follow in the background; the cancellation's events show up live.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := newOutBuffer()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"events", id, "--follow", "--server", s.url}, stdout, newOutBuffer())
	}()
	stdout.waitFor(t, "action.required")

	out := cliOK(t, "cancel", id, "--reason", "wrong customer", "--server", s.url)
	require.Contains(t, out, "Cancel requested for "+id)
	stdout.waitFor(t, "turn.cancelled")
	stdout.waitFor(t, "→ cancelled")
	cancel()
	require.NoError(t, <-done, "interrupting --follow is the normal way to stop")

	sess := cliJSON[lt.Session](t, "show", id, "--server", s.url, "--json")
	require.Equal(t, lt.SessionCancelled, sess.Status)
}

func TestDecideInDoubtRequiresKnownAction(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	id, act := startFunctionSession(t, s)
	// A function call is not an in-doubt effect: the server refuses, naming
	// the field.
	r := cliRun(t, "decide", id, act.ID, "skip", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "invalid_request")
	r = cliRun(t, "decide", id, "act_missing", "happened", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "not_found")
	// By the action's id alone, the CLI reads the action and names the
	// command that fits it before sending anything.
	r = cliRun(t, "decide", act.ID, "skip", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "action "+act.ID+" is of type function_call; decide it with: longhaul respond "+act.ID)
	r = cliRun(t, "decide", "act_missing", "happened", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "not_found")
}

func parseJSONLines(t *testing.T, out string) []lt.Event {
	t.Helper()
	var events []lt.Event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev lt.Event
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		events = append(events, ev)
	}
	return events
}

func TestConstrainPinsAConstraint(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	id, _ := startFunctionSession(t, s)
	out := cliOK(t, "constrain", id, "Quote amounts in euros", "--server", s.url)
	require.Contains(t, out, "Pinned on "+id)
	require.Contains(t, out, "- Quote amounts in euros")
	sess := cliJSON[lt.Session](t, "show", id, "--server", s.url, "--json")
	require.Contains(t, sess.Constraints, "Quote amounts in euros")
	events := cliOK(t, "events", id, "--server", s.url)
	require.Contains(t, events, `pinned: "Quote amounts in euros"`)
	r := cliRun(t, "constrain", id, " ", "--server", s.url)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "constraint")
}

func TestCheckpointsAndFork(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.json", `{
	  "model": {"provider": "scripted", "script": [
	    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}]},
	    {"text": "done"}, {"text": "fork done"}
	  ]},
	  "tools": [{"name": "write_file"}]
	}`)
	cliOK(t, "run", "--server", s.url, "--agent-spec", spec, "go")
	sessions := cliJSON[[]lt.Session](t, "ls", "--server", s.url, "--json")
	id := sessions[0].ID
	cps := cliJSON[[]lt.Checkpoint](t, "checkpoints", id, "--server", s.url, "--json")
	require.Len(t, cps, 2)
	require.Contains(t, cliOK(t, "checkpoints", id, "--server", s.url), cps[0].ID)
	out := cliOK(t, "fork", id, "--checkpoint", cps[1].ID, "--input", "again", "--server", s.url)
	require.Contains(t, out, "Forked ses_")
	r := cliRun(t, "fork", id, "--server", s.url)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "--checkpoint")
}

// TestForkWebhookURL: longhaul fork keeps its origin's webhook_url, or
// sends the fork's notifications to --webhook-url, or nowhere with
// an empty --webhook-url; it prints the fork's own secret once, when it has
// one.
func TestForkWebhookURL(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	ctx := t.Context()
	origin, err := s.client.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", WebhookURL: "https://hooks.example.com/origin",
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text": "done"}]`)}}})
	require.NoError(t, err)
	s.waitEvent(t, origin.ID, lt.EventTurnCompleted)
	cps := cliJSON[[]lt.Checkpoint](t, "checkpoints", origin.ID, "--server", s.url, "--json")
	require.NotEmpty(t, cps)
	fork := func(args ...string) (out string, fork lt.Session) {
		t.Helper()
		out = cliOK(t, append([]string{"fork", origin.ID, "--checkpoint", cps[len(cps)-1].ID, "--server", s.url}, args...)...)
		id := regexp.MustCompile(`Forked (ses_\w+)`).FindStringSubmatch(out)
		require.NotNil(t, id, out)
		return out, cliJSON[lt.Session](t, "show", id[1], "--server", s.url, "--json")
	}
	out, kept := fork()
	require.Equal(t, "https://hooks.example.com/origin", kept.WebhookURL)
	require.Regexp(t, `Its notifications go to https://hooks.example.com/origin, signed with whsec_\S+ \(shown only now\)`, out)
	require.NotContains(t, out, origin.WebhookSecret, "a secret of the fork's own")
	out, moved := fork("--webhook-url", "https://hooks.example.com/forks")
	require.Equal(t, "https://hooks.example.com/forks", moved.WebhookURL)
	require.Contains(t, out, "Its notifications go to https://hooks.example.com/forks, signed with whsec_")
	out, silent := fork("--webhook-url", "")
	require.Empty(t, silent.WebhookURL)
	require.NotContains(t, out, "notifications")
	r := cliRun(t, "fork", origin.ID, "--checkpoint", cps[len(cps)-1].ID, "--webhook-url", "ftp://nowhere", "--server", s.url)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "webhook_url")
}

func TestSignalCommand(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.json", `{
	  "model": {"provider": "scripted", "script": [
	    {"tool_calls": [{"name": "wait_for_signal", "arguments": {"name": "go"}}]}, {"text": "went"}]},
	  "tools": [{"name": "wait_for_signal"}]
	}`)
	done := make(chan result, 1)
	go func() { done <- cliRun(t, "run", "--server", s.url, "--agent-spec", spec, "wait") }()
	var id string
	require.Eventually(t, func() bool {
		l, err := s.client.ListSessions(context.Background(), client.ListSessionsParams{Status: lt.SessionWaiting})
		if err != nil || len(l.Data) == 0 {
			return false
		}
		id = l.Data[0].ID
		return true
	}, 10*time.Second, 5*time.Millisecond)
	r := cliRun(t, "signal", id, "go", "--payload", "{bad", "--server", s.url)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "--payload")
	require.Contains(t, cliOK(t, "signal", id, "go", "--payload", `{"n": 1}`, "--server", s.url), "delivered to the waiting session")
	res := <-done
	require.NoError(t, res.err, res.stderr)
	require.Contains(t, res.stdout, "went")
}
