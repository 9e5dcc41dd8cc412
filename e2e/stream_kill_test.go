package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// What the stalling server streams: the first call's piece (long enough
// to be journaled as a model.delta before the call hangs, deltas being
// coalesced by size), and the whole answer of the call made again.
var (
	stalledPiece  = strings.Repeat("cut short ", 60)
	resumedAnswer = "The answer, whole."
)

// stallingChat is a local OpenAI-compatible server whose first call
// streams part of an answer and then hangs until its client goes away (the
// server killed mid-stream); later calls stream a whole answer and report
// no usage, as some local servers do.
type stallingChat struct{ calls atomic.Int32 }

func (c *stallingChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.calls.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta, finish string) {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-%d\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\"local-model\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", n, delta, fin)
		w.(http.Flusher).Flush()
	}
	text := func(s string) string {
		b, _ := json.Marshal(map[string]string{"content": s})
		return string(b)
	}
	if n == 1 {
		send(text(stalledPiece), "")
		<-r.Context().Done()
		return
	}
	send(text(resumedAnswer), "")
	send(`{}`, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestStreamKilledMidCallResumesAsNextAttempt: the server is SIGKILLed while
// a model call streams; after the restart the call is made again as
// attempt 2, so its model.delta events never merge with the dead call's,
// and its usage, which the local server did not report, says it is an
// estimate.
func TestStreamKilledMidCallResumesAsNextAttempt(t *testing.T) {
	t.Parallel()
	chat := &stallingChat{}
	model := httptest.NewServer(chat)
	t.Cleanup(model.Close)
	srv := startServer(t)
	ctx := t.Context()
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:        lt.ModelSpec{Provider: "openai-compatible", Name: "local-model", BaseURL: model.URL + "/v1"},
			Instructions: "Answer.",
		},
		Input: "go",
	})
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "the first call's delta", func() (bool, error) {
		for _, ev := range journal(ctx, t, srv.api, sess.ID) {
			if ev.Type == lt.EventModelDelta {
				return true, nil
			}
		}
		return false, nil
	})
	srv.restart()
	s := waitTerminal(ctx, t, srv, sess.ID, 30*time.Second)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", deref(s.StopReason))
	require.Equal(t, int32(2), chat.calls.Load())

	var attempts []int
	for _, d := range eventData[lt.ModelRequestedData](ctx, t, srv.api, sess.ID, lt.EventModelRequested) {
		require.Equal(t, 1, d.Step)
		attempts = append(attempts, d.Attempt)
	}
	text := map[int]string{}
	for _, d := range eventData[lt.ModelDeltaData](ctx, t, srv.api, sess.ID, lt.EventModelDelta) {
		text[d.Attempt] += d.Text
	}
	responded := eventData[lt.ModelRespondedData](ctx, t, srv.api, sess.ID, lt.EventModelResponded)
	require.Len(t, responded, 1)
	require.Equal(t, resumedAnswer, responded[0].Text)
	require.True(t, responded[0].Usage.Estimated, "the server reported no usage")
	require.Positive(t, responded[0].Usage.InputTokens)
	require.Equal(t, []int{1, 2}, attempts)
	require.Equal(t, map[int]string{1: stalledPiece, 2: resumedAnswer}, text, "each attempt's deltas apart")
	require.True(t, s.Usage.Estimated)
}
