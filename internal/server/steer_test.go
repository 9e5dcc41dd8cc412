package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// slowSession is a create-session body whose first model call lasts ten
// minutes: the session runs until something stops it.
const slowSession = `{
  "agent_spec": {
    "model": {"provider": "scripted", "script": [{"delay_ms": 600000, "text": "late"}]},
    "instructions": "Wait."
  },
  "input": "go"
}`

// TestSteerEndpoint: POST /v1/sessions/{id}/steer answers 200 with the
// session once turn.steered is journaled, replays under its Idempotency-Key,
// names the field of a bad body, and is 404 for an unknown session and 409
// for one with no turn running; the Go client's Steer says the same, and
// its interrupt ends the call in flight.
func TestSteerEndpoint(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	r := h.post("/v1/sessions", slowSession)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	s := decode[lt.Session](t, r)
	path := "/v1/sessions/" + s.ID + "/steer"
	// The steers below must find the ten-minute call in flight: one read
	// in before the call starts is carried by it, and nothing is abandoned.
	waitEventType(t, h, s.ID, lt.EventModelRequested)

	body := []byte(`{"input":"Answer in one line.","interrupt":false}`)
	key := map[string]string{"Idempotency-Key": "steer-1", "Content-Type": "application/json"}
	r = h.do(http.MethodPost, path, body, key)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := decode[lt.Session](t, r)
	require.Equal(t, s.ID, got.ID)
	again := h.do(http.MethodPost, path, body, key)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, string(r.body), string(again.body), "a replay answers the same")
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	requireError(t, h.do(http.MethodPost, path, []byte(`{"input":"Something else."}`), key), http.StatusConflict, "conflict", "")
	steered := 0
	for _, raw := range h.allEvents(s.ID, 100) {
		var ev lt.Event
		require.NoError(t, json.Unmarshal(raw, &ev))
		if ev.Type == lt.EventTurnSteered {
			steered++
			// Sent with an Idempotency-Key: the event carries the seed of
			// its claim, by which a retry after a crash finds it.
			var d map[string]any
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			require.Regexp(t, `^[0-9a-z]{26}$`, d["request"])
			delete(d, "request")
			rest, err := json.Marshal(d)
			require.NoError(t, err)
			require.JSONEq(t, `{"turn_id":"`+ev.TurnID+`","input":"Answer in one line.","actor":{"name":"local","role":"admin"}}`, string(rest))
		}
	}
	require.Equal(t, 1, steered, "journaled once")

	// A page elsewhere cannot steer: a body must be JSON.
	requireError(t, h.do(http.MethodPost, path, []byte(`{"input":"x"}`), map[string]string{"Content-Type": "text/plain"}),
		http.StatusForbidden, "forbidden", "Content-Type")
	requireError(t, h.post(path, `{}`), http.StatusBadRequest, "invalid_request", "input")
	requireError(t, h.post(path, `{"input":"  "}`), http.StatusBadRequest, "invalid_request", "input")
	requireError(t, h.post(path, `{"input":"x","interupt":true}`), http.StatusBadRequest, "invalid_request", "interupt")
	requireError(t, h.post(path, `{"input":"x","interrupt":"yes"}`), http.StatusBadRequest, "invalid_request", "interrupt")
	requireError(t, h.post(path, `{"input":"`+strings.Repeat("x", 40<<10)+`"}`), http.StatusBadRequest, "invalid_request", "input")
	requireError(t, h.post("/v1/sessions/ses_nope/steer", `{"input":"x"}`), http.StatusNotFound, "not_found", "")

	c, err := client.New(h.ts.URL, nil)
	require.NoError(t, err)
	viaClient, err := c.Steer(ctx, s.ID, &lt.SteerRequest{Input: "Stop waiting.", Interrupt: true})
	require.NoError(t, err)
	require.Equal(t, s.ID, viaClient.ID)
	_, err = c.Steer(ctx, "ses_nope", &lt.SteerRequest{Input: "x"})
	require.True(t, client.IsNotFound(err), "%v", err)

	// The interrupt abandoned the ten-minute call; made again, it ends the
	// turn (the script is over): nothing runs now.
	h.waitStatus(s.ID, lt.SessionIdle)
	e := requireError(t, h.post(path, `{"input":"x"}`), http.StatusConflict, "conflict", "")
	require.Contains(t, e.Message, "send a follow-up turn instead")
	_, err = c.Steer(ctx, s.ID, &lt.SteerRequest{Input: "x"})
	require.True(t, client.IsConflict(err), "%v", err)
}

// waitEventType polls the session's journal until it holds an event of typ.
func waitEventType(t *testing.T, h *harness, id, typ string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, raw := range h.allEvents(id, 500) {
			var ev lt.Event
			require.NoError(t, json.Unmarshal(raw, &ev))
			if ev.Type == typ {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "session %s journaled no %s", id, typ)
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}
