package e2e

import (
	"context"
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

// brokenStreamServer speaks OpenAI's Chat Completions streaming format as
// a hostile model behind it would: every answer is a long text that breaks
// off before its end (no finish_reason, no usage, no [DONE]), which the
// engine retries as a whole call.
type brokenStreamServer struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func newBrokenStreamServer(t *testing.T) *brokenStreamServer {
	b := &brokenStreamServer{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(b.calls.Add(1))
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chatChunk(n, `{"role":"assistant","content":""}`, ""))
		words := strings.Repeat("an answer that goes on and on ", 40)
		for range 10 {
			fmt.Fprintf(w, "data: %s\n\n", chatChunk(n, fmt.Sprintf(`{"content":%q}`, words), ""))
		}
		// The connection ends here: the stream is cut.
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// TestAdversarialBudget_BrokenStreams: a model that answers at length and
// breaks off its stream every time, so that each attempt fails and is
// retried, cannot spend past the session's token budget: each attempt
// counts its input and what it streamed (estimated offline, as the
// provider bills them), and the budget, checked before each attempt,
// stops the turn. Before, a failed attempt counted nothing but itself,
// and the model streamed for free until its retries ran out.
func TestAdversarialBudget_BrokenStreams(t *testing.T) {
	t.Parallel()
	const key = "sk-local-canary-b0c7e2"
	chat := newBrokenStreamServer(t)
	srv := startServerWithEnv(t, []string{"LOCAL_MODEL_KEY=" + key}, "--model-key-env", "LOCAL_MODEL_KEY="+chat.srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const maxTokens = 5000
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:        lt.ModelSpec{Provider: "openai-compatible", Name: "local-model", BaseURL: chat.srv.URL + "/v1", APIKeyEnv: "LOCAL_MODEL_KEY"},
			Instructions: "Answer.",
		},
		Input:  "Go.",
		Budget: &lt.Budget{MaxTokens: maxTokens},
	})
	require.NoError(t, err)
	s := waitTerminal(ctx, t, srv, sess.ID, 2*time.Minute)
	require.Equal(t, lt.SessionFailed, s.Status)
	require.Equal(t, lt.StopBudgetExceeded, deref(s.StopReason), "the budget stopped it, not its retries running out")

	var failed, counted int64
	for _, ev := range journal(ctx, t, srv.api, s.ID) {
		if ev.Type != lt.EventModelFailed {
			continue
		}
		failed++
		d, err := lt.DataAs[lt.ModelFailedData](ev)
		require.NoError(t, err)
		require.NotNil(t, d.Usage, "a broken stream counts what was sent and streamed")
		require.True(t, d.Usage.Estimated)
		require.Positive(t, d.Usage.OutputTokens)
		counted += d.Usage.InputTokens + d.Usage.OutputTokens
	}
	require.GreaterOrEqual(t, failed, int64(2))
	require.Equal(t, counted, s.Usage.InputTokens+s.Usage.OutputTokens)
	require.GreaterOrEqual(t, counted, int64(maxTokens), "stopped once the streams had spent the budget")
	require.Less(t, counted, int64(maxTokens)+counted/failed+1, "at most one attempt past it")
	require.Equal(t, failed, chat.calls.Load(), "every attempt the server saw is in the journal")
}
