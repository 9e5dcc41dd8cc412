package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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
