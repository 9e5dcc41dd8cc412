package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestShowSaysCancelRequested: a session whose cancel has not yet taken
// effect says so next to its status.
func TestShowSaysCancelRequested(t *testing.T) {
	t.Parallel()
	s := treeSession("ses_c", "", lt.SessionRunning, 10)
	s.CancelRequested = true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/sessions/ses_c":
			_ = json.NewEncoder(w).Encode(s)
		case "/v1/sessions/ses_c/turns":
			_ = json.NewEncoder(w).Encode(lt.List[lt.Turn]{Data: []lt.Turn{{ID: "turn_1", SessionID: "ses_c", Index: 1,
				Status: lt.TurnRunning, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	require.Regexp(t, `(?m)^Status: +running \(cancel requested\)$`, cliOK(t, "show", "ses_c", "--server", srv.URL))
	require.True(t, cliJSON[lt.Session](t, "show", "ses_c", "--json", "--server", srv.URL).CancelRequested)
}
