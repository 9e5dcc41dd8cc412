package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func chatSpec() lt.ModelSpec {
	s := openaiSpec("gpt-4o-mini")
	s.API = "chat"
	return s
}

func compatSpec() lt.ModelSpec {
	return lt.ModelSpec{Provider: NameCompatible, Name: "llama3.2"}
}

func TestChatTextDeltasInOrder(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, sse(chatRoleChunk(), chatTextChunk("Hel"), chatTextChunk("lo, "), chatTextChunk("world."), chatFinishChunk("stop"), chatUsageChunk(19, 0, 10, 0), doneFrame))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	var got deltas
	spec := chatSpec()
	spec.Temperature = float(0)
	spec.MaxOutputTokens = 256
	resp, err := respond(t, p, f, "/v1", &model.Request{
		Spec:   spec,
		APIKey: testKey,
		Messages: []model.Message{
			{Role: model.RoleSystem, Text: "Be brief."},
			{Role: model.RoleUser, Text: "Say hello."},
		},
		OnDelta: got.on,
	})
	require.NoError(t, err)
	require.Equal(t, []string{"Hel", "lo, ", "world."}, got.text)
	require.Equal(t, "Hello, world.", resp.Text)
	require.Equal(t, chatModel, resp.Model)
	require.Equal(t, "stop", resp.StopReason)
	require.Equal(t, lt.Usage{InputTokens: 19, OutputTokens: 10}, resp.Usage)
	require.Nil(t, resp.Reasoning)

	c := f.Calls()[0]
	require.Equal(t, "/v1/chat/completions", c.Path)
	require.Equal(t, "Bearer "+testKey, c.Header.Get("Authorization"))
	require.Equal(t, true, c.Body["stream"])
	require.JSONEq(t, `{"include_usage":true}`, c.JSON(t, "stream_options"))
	require.Equal(t, "gpt-4o-mini", c.Body["model"])
	require.Equal(t, 0.0, c.Body["temperature"], "a temperature of 0 is sent, not dropped")
	require.Equal(t, 256.0, c.Body["max_completion_tokens"])
	require.NotContains(t, c.Body, "max_tokens")
	require.JSONEq(t, `[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello."}]`, c.JSON(t, "messages"))
}

func TestChatParallelToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	// Two calls whose argument fragments interleave, as the API streams
	// parallel calls by index.
	first := sse(chatRoleChunk(),
		chatToolStart(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather"),
		chatToolArgs(0, `{"location":`),
		chatToolStart(1, "call_ABCDEFGHIJKLMNOPQRSTUVWX", "get_time"),
		chatToolArgs(1, `{"tz":"Europe/Paris"}`),
		chatToolArgs(0, `"Paris"}`),
		chatFinishChunk("tool_calls"),
		chatUsageChunk(82, 0, 46, 0),
		doneFrame)
	second := sse(chatRoleChunk(), chatTextChunk("Sunny, 14:00."), chatFinishChunk("stop"), chatUsageChunk(150, 64, 8, 0), doneFrame)
	f := newFakeAPI(t, first, second)
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	tools := []model.ToolDef{
		{Name: "get_weather", Description: "Weather now.", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)},
		{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"tz":{"type":"string"}}}`)},
	}
	msgs := []model.Message{{Role: model.RoleUser, Text: "Weather and time in Paris?"}}
	resp, err := respond(t, p, f, "", &model.Request{Spec: chatSpec(), Messages: msgs, Tools: tools})
	require.NoError(t, err)
	require.Equal(t, "tool_calls", resp.StopReason)
	require.Equal(t, []model.ToolCall{
		{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)},
		{ID: "call_ABCDEFGHIJKLMNOPQRSTUVWX", Name: "get_time", Arguments: json.RawMessage(`{"tz":"Europe/Paris"}`)},
	}, resp.ToolCalls)
	require.JSONEq(t, `[
		{"type":"function","function":{"name":"get_weather","description":"Weather now.","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}},
		{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}}
	]`, f.Calls()[0].JSON(t, "tools"))

	msgs = append(msgs,
		model.Message{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls},
		model.Message{Role: model.RoleTool, CallID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Text: `{"output":"sunny"}`},
		model.Message{Role: model.RoleTool, CallID: "call_ABCDEFGHIJKLMNOPQRSTUVWX", Text: `{"error":"tz database missing"}`, IsError: true},
	)
	resp, err = respond(t, p, f, "", &model.Request{Spec: chatSpec(), Messages: msgs, Tools: tools})
	require.NoError(t, err)
	require.Equal(t, "Sunny, 14:00.", resp.Text)
	require.Equal(t, lt.Usage{InputTokens: 150, CachedInputTokens: 64, OutputTokens: 8}, resp.Usage)
	require.JSONEq(t, `[
		{"role":"user","content":"Weather and time in Paris?"},
		{"role":"assistant","tool_calls":[
			{"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}},
			{"id":"call_ABCDEFGHIJKLMNOPQRSTUVWX","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"Europe/Paris\"}"}}
		]},
		{"role":"tool","tool_call_id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","content":"{\"output\":\"sunny\"}"},
		{"role":"tool","tool_call_id":"call_ABCDEFGHIJKLMNOPQRSTUVWX","content":"[tool error] {\"error\":\"tz database missing\"}"}
	]`, f.Calls()[1].JSON(t, "messages"))
}

func TestChatUsageWithCachedAndReasoningTokensAndCost(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, sse(chatRoleChunk(), chatTextChunk("42"), chatFinishChunk("stop"), chatUsageChunk(5_000, 4_096, 900, 768), doneFrame))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	spec := chatSpec()
	spec.Pricing = json.RawMessage(`{"input_per_mtok":2,"cached_input_per_mtok":0.5,"output_per_mtok":8}`)
	resp, err := respond(t, p, f, "", &model.Request{Spec: spec, Messages: []model.Message{{Role: model.RoleUser, Text: "?"}}})
	require.NoError(t, err)
	require.Equal(t, lt.Usage{InputTokens: 5_000, CachedInputTokens: 4_096, OutputTokens: 900, ReasoningTokens: 768}, resp.Usage)
	require.InDelta(t, (904*2+4_096*0.5+900*8)/1e6, resp.CostUSD, 1e-12)
}

func TestChatCostFromTheShippedTable(t *testing.T) {
	t.Parallel()
	spec := chatSpec()
	price, ok := model.DefaultPricing(spec.Provider, spec.Name)
	require.True(t, ok, "the shipped table prices %s", spec.Name)
	f := newFakeAPI(t, sse(chatRoleChunk(), chatTextChunk("ok"), chatFinishChunk("stop"), chatUsageChunk(1_000_000, 0, 1_000_000, 0), doneFrame))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	resp, err := respond(t, p, f, "", &model.Request{Spec: spec, Messages: []model.Message{{Role: model.RoleUser, Text: "?"}}})
	require.NoError(t, err)
	require.InDelta(t, price.InputPerMTok+price.OutputPerMTok, resp.CostUSD, 1e-9)
	require.Positive(t, resp.CostUSD)
}

func TestCompatibleWithoutKey(t *testing.T) {
	t.Parallel()
	// An Ollama-like server: no key, no usage chunk (it ignores
	// stream_options), reasoning streamed as "reasoning", a tool call sent
	// whole and without an id.
	f := newFakeAPI(t, sse(
		chunk(`{"id":"chatcmpl-725","object":"chat.completion.chunk","created":1741570283,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Need the file."},"finish_reason":null}]}`),
		chunk(`{"id":"chatcmpl-725","object":"chat.completion.chunk","created":1741570283,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}]},"finish_reason":null}]}`),
		chunk(`{"id":"chatcmpl-725","object":"chat.completion.chunk","created":1741570283,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`),
		doneFrame))
	p := New(Config{Name: NameCompatible, HTTPClient: f.Client()})

	spec := compatSpec()
	spec.MaxOutputTokens = 100
	var got deltas
	resp, err := respond(t, p, f, "/v1", &model.Request{Spec: spec, Position: 7, Messages: []model.Message{{Role: model.RoleUser, Text: "read a.txt"}}, OnDelta: got.on})
	require.NoError(t, err)
	require.Equal(t, []model.ToolCall{{ID: "call_7_0", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}, resp.ToolCalls)
	require.Equal(t, &model.Reasoning{Provider: NameCompatible, Text: "Need the file."}, resp.Reasoning)
	require.Equal(t, []string{"Need the file."}, got.reasoning)
	require.Equal(t, "llama3.2", resp.Model)
	require.Equal(t, lt.Usage{}, resp.Usage)
	require.Zero(t, resp.CostUSD, "a local model is never priced from the shipped table")

	c := f.Calls()[0]
	require.Equal(t, "/v1/chat/completions", c.Path)
	require.Empty(t, c.Header.Values("Authorization"))
	require.Equal(t, 100.0, c.Body["max_tokens"])
	require.NotContains(t, c.Body, "max_completion_tokens")
}

func TestCompatibleWithKey(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, sse(chatTextChunk("hi"), chatFinishChunk("stop"), chatUsageChunk(3, 0, 1, 0), doneFrame))
	p := New(Config{Name: NameCompatible, HTTPClient: f.Client()})
	resp, err := respond(t, p, f, "/v1", &model.Request{Spec: compatSpec(), APIKey: "litellm-key", Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	require.Equal(t, "hi", resp.Text)
	require.Equal(t, int64(3), resp.Usage.InputTokens)
	require.Equal(t, "Bearer litellm-key", f.Calls()[0].Header.Get("Authorization"))
}

func TestChatStreamFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		spec   lt.ModelSpec
		frames []string
		cut    bool
		kind   model.ErrorKind
		want   string
	}{
		{
			name: "connection dropped mid-response", spec: chatSpec(), cut: true, kind: model.KindServer, want: "closed in the middle",
			frames: []string{chatRoleChunk(), chatTextChunk("Half an")},
		},
		{
			name: "no finish_reason", spec: compatSpec(), kind: model.KindServer, want: "before a finish_reason",
			frames: []string{chatRoleChunk(), chatTextChunk("Half an"), doneFrame},
		},
		{
			name: "OpenAI stream without its usage chunk", spec: chatSpec(), kind: model.KindServer, want: "before the usage chunk",
			frames: []string{chatRoleChunk(), chatTextChunk("All"), chatFinishChunk("stop")},
		},
		{
			name: "malformed chunk", spec: chatSpec(), kind: model.KindServer, want: "invalid JSON",
			frames: []string{chatRoleChunk(), "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"\n\n"},
		},
		{
			name: "error chunk mid-stream", spec: chatSpec(), kind: model.KindServer, want: "The server had an error while processing your request.",
			frames: []string{chatRoleChunk(), chatTextChunk("Half"), chunk(`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`)},
		},
		{
			name: "auth error chunk from a gateway", spec: compatSpec(), kind: model.KindAuth, want: "authentication_error",
			frames: []string{chunk(`{"error":{"message":"Authentication Error, Invalid proxy server token passed.","type":"auth_error","code":"authentication_error"}}`)},
		},
		{
			name: "context error chunk from a compatible server", spec: compatSpec(), kind: model.KindContextTooLong, want: "maximum context length",
			frames: []string{chunk(`{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","code":400}}`)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := sse(tc.frames...)
			if tc.cut {
				h = sseCut(tc.frames...)
			}
			f := newFakeAPI(t, h)
			p := New(Config{Name: tc.spec.Provider, HTTPClient: f.Client()})
			resp, err := respond(t, p, f, "", &model.Request{Spec: tc.spec, APIKey: testKey, Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
			require.Nil(t, resp, "a broken stream never yields a response")
			me := requireModelError(t, err, tc.kind)
			require.Contains(t, me.Message, tc.want)
		})
	}
}
