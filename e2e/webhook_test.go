package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// notification is what a webhook body names: its type and the seq of the
// journal event that caused it.
type notification struct {
	Type string
	Seq  int64
}

// hookRequest is one request the receiver got.
type hookRequest struct {
	id        string
	n         notification
	verifyErr error
	held      bool // arrived while the receiver held requests
}

// hookReceiver is the application's webhook endpoint: it verifies every
// request with the Standard Webhooks reference library and the session's
// secret. Until release it holds each request unanswered (a receiver that
// hangs while the server dies); held requests are never answered 2xx.
// After release it answers 204 and counts, per webhook-id, the 2xx given.
type hookReceiver struct {
	srv *httptest.Server

	secretSet chan struct{}
	release   chan struct{}

	mu       sync.Mutex
	wh       *standardwebhooks.Webhook
	released bool
	got      []hookRequest
	ok       map[string]int          // webhook-id → 2xx answers
	okAt     map[string]time.Time    // webhook-id → when it was answered 2xx
	okBody   map[string]notification // webhook-id → what the 2xx request said
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	r := &hookReceiver{
		secretSet: make(chan struct{}), release: make(chan struct{}),
		ok: map[string]int{}, okAt: map[string]time.Time{}, okBody: map[string]notification{},
	}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	// Release before closing (cleanups run last first): Close waits for
	// the handlers.
	t.Cleanup(r.srv.Close)
	t.Cleanup(r.releaseAll)
	return r
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // the sender went away
	}
	// The session's secret arrives in the 201 of POST /v1/sessions, which
	// the first notification may overtake.
	select {
	case <-r.secretSet:
	case <-req.Context().Done():
		return
	}
	var wire struct {
		Type      string `json:"type"`
		SessionID string `json:"session_id"`
		EventSeq  int64  `json:"event_seq"`
	}
	r.mu.Lock()
	hr := hookRequest{id: req.Header.Get(standardwebhooks.HeaderWebhookID), verifyErr: r.wh.Verify(body, req.Header), held: !r.released}
	if err := json.Unmarshal(body, &wire); err != nil && hr.verifyErr == nil {
		hr.verifyErr = fmt.Errorf("body: %w", err)
	}
	hr.n = notification{Type: wire.Type, Seq: wire.EventSeq}
	r.got = append(r.got, hr)
	r.mu.Unlock()

	if hr.verifyErr != nil {
		http.Error(w, hr.verifyErr.Error(), http.StatusUnauthorized)
		return
	}
	if hr.held {
		select {
		case <-r.release:
		case <-req.Context().Done():
		}
		// Its sender is dead by now: this answer goes nowhere.
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.mu.Lock()
	r.ok[hr.id]++
	r.okAt[hr.id] = time.Now()
	r.okBody[hr.id] = hr.n
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *hookReceiver) setSecret(t *testing.T, secret string) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	r.mu.Lock()
	r.wh = wh
	r.mu.Unlock()
	close(r.secretSet)
}

// releaseAll ends the holding: waiting requests get their (useless)
// answer, later ones a 204.
func (r *hookReceiver) releaseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.released {
		r.released = true
		close(r.release)
	}
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// answered returns, per webhook-id, how many 2xx it got and what it said.
func (r *hookReceiver) answered() (map[string]int, map[string]notification, map[string]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.ok), maps.Clone(r.okBody), maps.Clone(r.okAt)
}

func (r *hookReceiver) port(t *testing.T) int {
	t.Helper()
	u, err := url.Parse(r.srv.URL)
	require.NoError(t, err)
	p, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	return p
}

// expectedNotifications derives from a journal the notifications a
// session's webhook_url is owed (API.md "Webhooks"): session.completed for
// each turn.completed, and one per status change to requires_action, idle,
// failed or cancelled.
func expectedNotifications(t *testing.T, events []lt.Event) map[notification]bool {
	t.Helper()
	want := map[notification]bool{}
	for _, ev := range events {
		switch ev.Type {
		case lt.EventTurnCompleted:
			want[notification{lt.WebhookSessionCompleted, ev.Seq}] = true
		case lt.EventSessionStatusChanged:
			var sc struct {
				To lt.SessionStatus `json:"to"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &sc), "status change %d", ev.Seq)
			switch sc.To {
			case lt.SessionRequiresAction:
				want[notification{lt.WebhookSessionRequiresAction, ev.Seq}] = true
			case lt.SessionIdle:
				want[notification{lt.WebhookSessionIdle, ev.Seq}] = true
			case lt.SessionFailed:
				want[notification{lt.WebhookSessionFailed, ev.Seq}] = true
			case lt.SessionCancelled:
				want[notification{lt.WebhookSessionCancelled, ev.Seq}] = true
			}
		}
	}
	return want
}

// waitDelivered polls until every notification in want was answered 2xx
// and returns the answers.
func waitDelivered(t *testing.T, r *hookReceiver, want map[notification]bool) (map[string]int, map[string]notification, map[string]time.Time) {
	t.Helper()
	var ok map[string]int
	var bodies map[string]notification
	var at map[string]time.Time
	waitFor(t, 30*time.Second, fmt.Sprintf("%d notifications answered 2xx", len(want)), func() (bool, error) {
		for _, hr := range r.requests() {
			if hr.verifyErr != nil {
				return false, fmt.Errorf("request %s failed verification: %w", hr.id, hr.verifyErr)
			}
		}
		ok, bodies, at = r.answered()
		have := map[notification]bool{}
		for _, n := range bodies {
			have[n] = true
		}
		for n := range want {
			if !have[n] {
				return false, nil
			}
		}
		return true, nil
	})
	return ok, bodies, at
}

// TestWebhookDeliveriesSurviveKill: a session's notifications are pending
// or in flight — its receiver hangs on every request — when the server is
// SIGKILLed. After a restart on the same data directory every notification
// the journal calls for is delivered, each under one webhook-id (the one a
// request before the kill carried, if any), each answered 2xx once, every
// request verified by the Standard Webhooks reference library, and the
// deliveries API lists them delivered with their attempts.
func TestWebhookDeliveriesSurviveKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	recv := newHookReceiver(t)
	srv := startServer(t, "--webhook-allow-private", "127.0.0.1", "--webhook-allow-port", strconv.Itoa(recv.port(t)))

	// ask_human makes the session require an action; the answer lets the
	// turn complete: requires_action, idle and completed notifications.
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Name: "webhooks", Script: json.RawMessage(`[
				{"tool_calls": [{"name": "ask_human", "arguments": {"question": "Ship it?"}}]},
				{"text": "Shipped."}]`)},
			Instructions: "Ask, then answer.",
			Tools:        []lt.ToolSpec{{Name: "ask_human"}},
		},
		Input:      "ship the release",
		WebhookURL: recv.srv.URL + "/hooks/longhaul",
	})
	require.NoError(t, err)
	recv.setSecret(t, sess.WebhookSecret)

	// Phase 1: the first notification reaches the receiver and hangs there;
	// the session goes on to idle, so the others are due behind it.
	waitFor(t, 30*time.Second, "the first webhook request", func() (bool, error) {
		return len(recv.requests()) > 0, nil
	})
	actions, err := srv.api.ListActions(ctx, sess.ID, lt.ActionPending)
	require.NoError(t, err)
	require.Len(t, actions.Data, 1)
	require.Equal(t, lt.ActionInput, actions.Data[0].Type)
	_, err = srv.api.DecideAction(ctx, sess.ID, actions.Data[0].ID, &lt.Decision{Answer: "yes"})
	require.NoError(t, err)
	s := waitTerminal(ctx, t, srv, sess.ID, 30*time.Second)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", deref(s.StopReason))

	srv.kill()
	beforeKill := map[string]notification{}
	for _, hr := range recv.requests() {
		require.NoError(t, hr.verifyErr, "request %s before the kill", hr.id)
		require.True(t, hr.held)
		beforeKill[hr.id] = hr.n
	}
	require.NotEmpty(t, beforeKill)
	t.Logf("held at the kill: %v", beforeKill)
	ok, _, _ := recv.answered()
	require.Empty(t, ok, "nothing was answered 2xx before the kill: every notification was pending or in flight")

	// Phase 2: the receiver answers now; the server comes back.
	recv.releaseAll()
	srv.restart()
	restarted := time.Now()
	want := expectedNotifications(t, journal(ctx, t, srv.api, sess.ID))
	require.Len(t, want, 3, "requires_action, idle and completed: %v", want)
	_, bodies, at := waitDelivered(t, recv, want)
	for id, n := range beforeKill {
		require.Equal(t, n, bodies[id], "%s, in flight at the kill, is delivered with its original id", id)
		// Its attempt died with the server, unrecorded: it is due at once,
		// not after the schedule's next step (5 s).
		require.Less(t, at[id].Sub(restarted), 5*time.Second, "%s was sent again promptly", id)
	}

	// A later turn's notifications are delivered too. When they have been,
	// the dispatcher has been through its outbox again since the first
	// ones: a 2xx'd notification sent twice would show now.
	turn, err := srv.api.CreateTurn(ctx, sess.ID, &lt.CreateTurnRequest{Input: "and again"})
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "the second turn", func() (bool, error) {
		tr, err := srv.api.GetTurn(ctx, sess.ID, turn.ID)
		if err == nil && tr.Status.Done() {
			require.Equal(t, lt.TurnCompleted, tr.Status)
			return true, nil
		}
		return false, err
	})
	want = expectedNotifications(t, journal(ctx, t, srv.api, sess.ID))
	require.Len(t, want, 5, "plus the second turn's idle and completed: %v", want)
	ok, bodies, _ = waitDelivered(t, recv, want)

	delivered := map[notification]string{}
	for id, n := range bodies {
		require.Equal(t, 1, ok[id], "%s (%v) was answered 2xx once", id, n)
		require.Empty(t, delivered[n], "%v was delivered under two ids", n)
		delivered[n] = id
	}
	require.Len(t, delivered, len(want), "exactly the notifications the journal calls for")
	for n := range want {
		require.NotEmpty(t, delivered[n], "%v delivered", n)
	}
	for _, hr := range recv.requests() {
		require.NoError(t, hr.verifyErr, "request %s", hr.id)
		require.Contains(t, bodies, hr.id, "request %s is one of the delivered notifications", hr.id)
	}

	// The server's record agrees: each delivered, with its attempts. (It
	// records an answer after the receiver gave it: poll.)
	listed := map[string]lt.WebhookDelivery{}
	waitFor(t, 30*time.Second, "the deliveries recorded as delivered", func() (bool, error) {
		var list lt.List[lt.WebhookDelivery]
		getJSON(ctx, t, srv.url+"/v1/webhooks/deliveries?limit=500", &list)
		clear(listed)
		for _, d := range list.Data {
			if d.SessionID == sess.ID {
				listed[d.ID] = d
			}
		}
		for _, d := range listed {
			if d.Status != "delivered" {
				return false, nil
			}
		}
		return len(listed) == len(want), nil
	})
	require.ElementsMatch(t, slices.Collect(maps.Keys(bodies)), slices.Collect(maps.Keys(listed)))
	for id, d := range listed {
		require.Equal(t, "delivered", d.Status, "delivery %s", id)
		require.Equal(t, notification{d.Type, d.EventSeq}, bodies[id], "delivery %s", id)
		require.Empty(t, d.EndpointID, "the session's own webhook_url")
		require.Equal(t, recv.srv.URL+"/hooks/longhaul", d.URL)
		require.NotEmpty(t, d.Attempts, "delivery %s has its attempts recorded", id)
		for i, a := range d.Attempts {
			require.Equal(t, i+1, a.Attempt, "delivery %s", id)
		}
		last := d.Attempts[len(d.Attempts)-1]
		require.Equal(t, http.StatusNoContent, last.StatusCode, "delivery %s", id)
	}
}

// getJSON GETs url from the server and decodes its 200 answer into out.
func getJSON(ctx context.Context, t *testing.T, url string, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.NoError(t, json.Unmarshal(body, out), string(body))
}

// TestServeRefusesBadWebhookPort: a --webhook-allow-port that is not a port
// number is a usage error naming the flag.
func TestServeRefusesBadWebhookPort(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"0", "65536", "-1"} {
		cmd := exec.Command(longhaulBin, "serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"), "--webhook-allow-port", p)
		cmd.Env = serverEnv()
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "serve --webhook-allow-port %s: %s", p, out)
		require.Equal(t, 2, exit.ExitCode(), "%s", out)
		require.Contains(t, string(out), "--webhook-allow-port "+p+": want a port number (1-65535)")
	}
}
