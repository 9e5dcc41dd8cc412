package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPauseAndResumeCommands: pause and resume against a real server; the
// paused session shows in show, ls --status paused and events, and a
// second resume is the server's 409.
func TestPauseAndResumeCommands(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	id, _ := startFunctionSession(t, s)

	require.Equal(t, "Paused "+id+".\n", cliOK(t, "pause", id, "--reason", "lunch", "--server", s.url))
	require.Regexp(t, `(?m)^Status: +paused$`, cliOK(t, "show", id, "--server", s.url))
	sess := cliJSON[lt.Session](t, "show", id, "--json", "--server", s.url)
	require.Equal(t, lt.SessionPaused, sess.Status)
	require.Equal(t, "lunch", sess.PauseReason)
	listed := cliJSON[[]lt.Session](t, "ls", "--status", "paused", "--json", "--server", s.url)
	require.Len(t, listed, 1)
	require.Equal(t, id, listed[0].ID)
	events := cliOK(t, "events", id, "--server", s.url)
	require.Regexp(t, `session\.paused +lunch`, events)
	require.Contains(t, events, "requires_action → paused")

	require.Equal(t, "Resumed "+id+" (status: requires_action).\n", cliOK(t, "resume", id, "--server", s.url))
	require.Regexp(t, `session\.resumed +after .* paused`, cliOK(t, "events", id, "--server", s.url))
	r := cliRun(t, "resume", id, "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "conflict (HTTP 409)")
	require.Contains(t, r.stderr, "is not paused")

	r = cliRun(t, "pause", "--server", s.url)
	require.Equal(t, exitUsage, r.code, "a session id is required")
}

// TestPauseRequestedIsShown: a pause that waits for the call in flight
// says so, in the pause command's answer and next to show's status.
func TestPauseRequestedIsShown(t *testing.T) {
	t.Parallel()
	s := treeSession("ses_p", "", lt.SessionRunning, 10)
	s.PauseRequested, s.PauseReason = true, "lunch"
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/sessions/ses_p/pause":
			b, _ := io.ReadAll(r.Body)
			body = string(b)
			_ = json.NewEncoder(w).Encode(s)
		case "/v1/sessions/ses_p":
			_ = json.NewEncoder(w).Encode(s)
		case "/v1/sessions/ses_p/turns":
			_ = json.NewEncoder(w).Encode(lt.List[lt.Turn]{Data: []lt.Turn{{ID: "turn_1", SessionID: "ses_p", Index: 1,
				Status: lt.TurnRunning, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	require.Equal(t, "Pause requested for ses_p (status: running): it pauses once the call in flight has finished.\n",
		cliOK(t, "pause", "ses_p", "--reason", "lunch", "--server", srv.URL))
	require.JSONEq(t, `{"reason":"lunch"}`, body)
	require.Regexp(t, `(?m)^Status: +running \(pause requested\)$`, cliOK(t, "show", "ses_p", "--server", srv.URL))
	require.True(t, cliJSON[lt.Session](t, "pause", "ses_p", "--json", "--server", srv.URL).PauseRequested)
}

// TestRunFollowsThroughAPause: `longhaul run` following a turn shows the
// pause with the command that resumes it, and goes on to the turn's end
// once the session is resumed and its action answered.
func TestRunFollowsThroughAPause(t *testing.T) {
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
	sessionID, actionID := hintIDs(t, stdout.waitFor(t, "longhaul respond "))

	cliOK(t, "pause", sessionID, "--server", s.url)
	stdout.waitFor(t, "paused; nothing runs until: longhaul resume "+sessionID)
	cliOK(t, "respond", actionID, "--server", s.url, "--output", `{"name": "ACME"}`)
	require.Equal(t, lt.SessionPaused, cliJSON[lt.Session](t, "show", sessionID, "--json", "--server", s.url).Status,
		"an answer while paused runs nothing")
	cliOK(t, "resume", sessionID, "--server", s.url)

	require.NoError(t, <-done, "stderr: %s", stderr.String())
	require.Contains(t, stdout.String(), "Output:\nCustomer c-7 is ACME.")
}

// TestPersonsPauseOfAPausedSubagentIsShownAsTheirs: in "longhaul events",
// a person's pause of a sub-agent already paused with its parent is not
// a pause to come: it says the pause is now theirs. The same event after a
// resume, or without the pause printed before, is a pause to come.
func TestPersonsPauseOfAPausedSubagentIsShownAsTheirs(t *testing.T) {
	ev := func(seq int64, typ string, data any) lt.Event {
		raw, err := json.Marshal(data)
		require.NoError(t, err)
		return lt.Event{Seq: seq, SessionID: "ses_kid", Type: typ, Data: raw}
	}
	alice := &lt.Actor{Name: "alice", Role: lt.RoleOperator}
	var out bytes.Buffer
	p := &eventPrinter{w: &out}
	for _, e := range []lt.Event{
		ev(1, lt.EventSessionPauseRequested, lt.SessionPauseRequestedData{Reason: "lunch", Actor: alice}),
		ev(2, lt.EventSessionPaused, lt.SessionPausedData{Reason: "lunch", Parent: "ses_root", Actor: alice}),
		ev(3, lt.EventSessionPauseRequested, lt.SessionPauseRequestedData{Reason: "mine now", Actor: alice}),
		ev(4, lt.EventSessionResumed, lt.SessionResumedData{PausedMS: 1000, Actor: alice}),
		ev(5, lt.EventSessionPauseRequested, lt.SessionPauseRequestedData{Reason: "again", Actor: alice}),
	} {
		require.NoError(t, p.print(e))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 5)
	require.Contains(t, lines[0], "at the next safe point: lunch")
	require.Contains(t, lines[2], "already paused, the pause is now this request's: mine now · by alice (operator)")
	require.Contains(t, lines[4], "at the next safe point: again")
}
