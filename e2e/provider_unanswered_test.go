package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// strictChatServer speaks OpenAI's Chat Completions streaming format and,
// like OpenAI's API (and Anthropic's, for its tool_use blocks), refuses a
// conversation in which an assistant message's tool call is not answered
// by the tool messages right after it. Its first answer asks for two
// list_files calls; every later one is text.
type strictChatServer struct {
	mu       sync.Mutex
	srv      *httptest.Server
	answers  int
	refusals []string
}

func newStrictChatServer(t *testing.T) *strictChatServer {
	c := &strictChatServer{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

// chatMessage is what strictChatServer reads of a request's message.
type chatMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
}

// unanswered returns the ids of the tool calls no tool message answers
// before the conversation goes on.
func unanswered(msgs []chatMessage) []string {
	var missing []string
	for i, m := range msgs {
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		answered := map[string]bool{}
		for _, r := range msgs[i+1:] {
			if r.Role != "tool" {
				break
			}
			answered[r.ToolCallID] = true
		}
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				missing = append(missing, c.ID)
			}
		}
	}
	return missing
}

func (c *strictChatServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body struct {
		Messages []chatMessage `json:"messages"`
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || json.Unmarshal(raw, &body) != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	if missing := unanswered(body.Messages); len(missing) > 0 {
		msg := "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(missing, ", ")
		c.refusals = append(c.refusals, msg)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": "messages", "code": nil}})
		w.Write(b)
		return
	}
	c.answers++
	n := c.answers
	c.mu.Unlock()

	var chunks []string
	if n == 1 {
		chunks = []string{
			chatChunk(n, `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"list_files","arguments":"{}"}}]}`, ""),
			chatChunk(n, `{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_files","arguments":"{\"path\":\".\"}"}}]}`, ""),
			chatChunk(n, `{}`, "tool_calls"),
		}
	} else {
		chunks = []string{chatChunk(n, `{"role":"assistant","content":"carried on"}`, ""), chatChunk(n, `{}`, "stop")}
	}
	writeChatStream(w, n, `{"prompt_tokens":50,"completion_tokens":5,"total_tokens":55}`, chunks)
}

// TestTurnAfterABudgetStopMidStep runs the real binary against a server
// that refuses unanswered tool calls, as OpenAI's and Anthropic's APIs do:
// the model asks for two calls, the session's budget allows one, the turn
// stops; the person raises the budget and sends a new turn, whose
// conversation must answer the call that never ran. It used to carry that
// call without a result, and the provider refused every later turn
// (provider_error): the documented way on after budget_exceeded led
// nowhere.
func TestTurnAfterABudgetStopMidStep(t *testing.T) {
	t.Parallel()
	const key = "sk-local-canary-5d20c7"
	chat := newStrictChatServer(t)
	srv := startServerWithEnv(t, []string{"LOCAL_MODEL_KEY=" + key}, "--model-key-env", "LOCAL_MODEL_KEY="+chat.srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:        lt.ModelSpec{Provider: "openai-compatible", Name: "local-model", BaseURL: chat.srv.URL + "/v1", APIKeyEnv: "LOCAL_MODEL_KEY"},
			Instructions: "List the files.",
			Tools:        []lt.ToolSpec{{Name: "list_files"}},
		},
		Input:  "What is here?",
		Budget: &lt.Budget{MaxToolCalls: 1},
	})
	require.NoError(t, err)
	s := waitTerminal(ctx, t, srv, sess.ID, time.Minute)
	require.Equal(t, lt.SessionFailed, s.Status)
	require.Equal(t, lt.StopBudgetExceeded, deref(s.StopReason))

	more := int64(10)
	_, err = srv.api.UpdateBudget(ctx, s.ID, &lt.BudgetPatch{MaxToolCalls: &more})
	require.NoError(t, err)
	_, err = srv.api.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "Go on."})
	require.NoError(t, err)
	s = waitTerminal(ctx, t, srv, sess.ID, time.Minute) // the new turn queued it at once
	chat.mu.Lock()
	refusals := append([]string(nil), chat.refusals...)
	chat.mu.Unlock()
	require.Empty(t, refusals, "the provider refused the conversation")
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", deref(s.StopReason))

	var notRun int
	for _, ev := range journal(ctx, t, srv.api, s.ID) {
		if ev.Type != lt.EventToolFailed {
			continue
		}
		var d lt.ToolFailedData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.Equal(t, "call_b", d.CallID)
		require.Contains(t, d.Error, "not run: ")
		notRun++
	}
	require.Equal(t, 1, notRun, "the call the budget stopped is journaled as not run")
}
