package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPauseResume: Pause and Resume post to their endpoints with a JSON
// body (a nil request is no reason) and return the session; an API error
// keeps its code; an empty id is refused before any request.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	type got struct {
		method, path, contentType, body string
	}
	requests := make(chan got, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		requests <- got{r.Method, r.URL.Path, r.Header.Get("Content-Type"), string(body)}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/sessions/ses_1/pause":
			_ = json.NewEncoder(w).Encode(lt.Session{ID: "ses_1", Status: lt.SessionRunning, PauseRequested: true, PauseReason: "lunch"})
		case "/v1/sessions/ses_1/resume":
			_ = json.NewEncoder(w).Encode(lt.Session{ID: "ses_1", Status: lt.SessionRunning})
		default:
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"conflict","message":"session ses_2 is not paused (status running)"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, nil)
	ctx := t.Context()

	s, err := c.Pause(ctx, "ses_1", &lt.PauseRequest{Reason: "lunch"})
	require.NoError(t, err)
	require.True(t, s.PauseRequested)
	require.Equal(t, "lunch", s.PauseReason)
	require.Equal(t, got{"POST", "/v1/sessions/ses_1/pause", "application/json", `{"reason":"lunch"}`}, <-requests)

	_, err = c.Pause(ctx, "ses_1", nil)
	require.NoError(t, err)
	require.Equal(t, got{"POST", "/v1/sessions/ses_1/pause", "application/json", `{}`}, <-requests)

	s, err = c.Resume(ctx, "ses_1")
	require.NoError(t, err)
	require.False(t, s.PauseRequested)
	require.Equal(t, got{"POST", "/v1/sessions/ses_1/resume", "application/json", `{}`}, <-requests)

	_, err = c.Resume(ctx, "ses_2")
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)
	require.Equal(t, "conflict", ae.Code)
	require.ErrorContains(t, err, "resume session ses_2")
	<-requests

	_, err = c.Pause(ctx, "", nil)
	require.ErrorContains(t, err, "pause session: sessionID is empty")
	_, err = c.Resume(ctx, "")
	require.ErrorContains(t, err, "resume session: sessionID is empty")
	require.Empty(t, requests, "no request for an empty id")
}
