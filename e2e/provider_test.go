package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// chatServer is a local server speaking OpenAI's Chat Completions streaming
// wire format, as Ollama, vLLM or llama.cpp do: the first call asks for a
// tool, the next one answers with text.
type chatServer struct {
	mu      sync.Mutex
	auth    []string
	bodies  []map[string]any
	srv     *httptest.Server
	streams int
}

func newChatServer(t *testing.T) *chatServer {
	c := &chatServer{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *chatServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.auth = append(c.auth, r.Header.Get("Authorization"))
	c.bodies = append(c.bodies, body)
	c.streams++
	n := c.streams
	c.mu.Unlock()

	chunk := func(delta, finish string) string { return chatChunk(n, delta, finish) }
	var events []string
	if n == 1 {
		events = []string{
			chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_w1","type":"function","function":{"name":"write_file","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"hello.txt\","}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"content\":\"hi from a local model\"}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
		}
	} else {
		events = []string{chunk(`{"role":"assistant","content":""}`, "")}
		for _, piece := range []string{"Wrote ", "hello.txt ", "in the ", "workspace."} {
			b, _ := json.Marshal(piece)
			events = append(events, chunk(`{"content":`+string(b)+`}`, ""))
		}
		events = append(events, chunk(`{}`, "stop"))
	}
	writeChatStream(w, n, `{"prompt_tokens":120,"completion_tokens":14,"total_tokens":134,"prompt_tokens_details":{"cached_tokens":100}}`, events)
}

// chatChunk is a chunk of answer n in Chat Completions' streaming format:
// delta, and the finish reason ("" for none yet).
func chatChunk(n int, delta, finish string) string {
	fin := "null"
	if finish != "" {
		fin = `"` + finish + `"`
	}
	return fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion.chunk","created":1764400000,"model":"local-model","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, n, delta, fin)
}

// writeChatStream streams answer n: its chunks, then a last chunk with
// its usage, then the stream's end.
func writeChatStream(w http.ResponseWriter, n int, usage string, chunks []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunks = append(chunks, fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion.chunk","created":1764400000,"model":"local-model","choices":[],"usage":%s}`, n, usage))
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestOpenAICompatibleProvider runs the real binary against a local
// OpenAI-compatible server: the key comes from the server's environment and
// is sent as a bearer token, the tool call round-trips, the answer streams
// into model.delta events, pricing from the spec gives the cost, and the key
// appears nowhere in the journal or the server's log.
func TestOpenAICompatibleProvider(t *testing.T) {
	t.Parallel()
	const key = "sk-local-canary-93b1f0"
	chat := newChatServer(t)
	// The operator allows the variable for this server's address only.
	srv := startServerWithEnv(t, []string{"LOCAL_MODEL_KEY=" + key}, "--model-key-env", "LOCAL_MODEL_KEY="+chat.srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{
				Provider: "openai-compatible", Name: "local-model", BaseURL: chat.srv.URL + "/v1",
				APIKeyEnv: "LOCAL_MODEL_KEY", Pricing: json.RawMessage(`{"input_per_mtok": 1, "cached_input_per_mtok": 0.1, "output_per_mtok": 2}`),
			},
			Instructions: "Write the file.",
			Tools:        []lt.ToolSpec{{Name: "write_file"}},
		},
		Input: "Say hi in hello.txt",
	})
	require.NoError(t, err)
	s := waitTerminal(ctx, t, srv, sess.ID, 30*time.Second)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", deref(s.StopReason))

	chat.mu.Lock()
	defer chat.mu.Unlock()
	require.Len(t, chat.auth, 2)
	for _, a := range chat.auth {
		require.Equal(t, "Bearer "+key, a)
	}
	require.Equal(t, "local-model", chat.bodies[0]["model"])
	second, _ := json.Marshal(chat.bodies[1]["messages"])
	require.Contains(t, string(second), `"tool_call_id":"call_w1"`, "the tool result goes back with its call id")

	evs := journal(ctx, t, srv.api, s.ID)
	var text strings.Builder
	var completed, deltas int
	for _, ev := range evs {
		require.NotContains(t, string(ev.Data), key)
		switch ev.Type {
		case lt.EventModelDelta:
			deltas++
			var d struct {
				Text string `json:"text"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			text.WriteString(d.Text)
		case lt.EventToolCompleted:
			completed++
		}
	}
	require.Equal(t, 1, completed)
	require.Positive(t, deltas)
	require.Equal(t, "Wrote hello.txt in the workspace.", text.String())
	// 2 calls × (20 uncached × $1 + 100 cached × $0.1 + 14 out × $2) per M.
	require.InDelta(t, 2*(20*1+100*0.1+14*2)/1e6, s.Usage.CostUSD, 1e-12)
	require.Equal(t, int64(200), s.Usage.CachedInputTokens)

	log, err := os.ReadFile(srv.logPath)
	require.NoError(t, err)
	require.NotContains(t, string(log), key)
}
