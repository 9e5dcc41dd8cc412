package openai

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// textStream is a complete Responses stream answering parts as one message.
func textStream(usage string, parts ...string) []string {
	frames := []string{created(0), inProgress(1)}
	msg, seq := messageEvents(2, 0, "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41", parts...)
	frames = append(frames, msg...)
	text := ""
	for _, p := range parts {
		text += p
	}
	return append(frames, completed(seq, "["+messageItem("msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41", text)+"]", usage))
}

func TestResponsesTextDeltasInOrder(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, sse(textStream(usageObject(36, 0, 87, 0), "Hel", "lo, ", "wor", "ld.")...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	var got deltas
	spec := openaiSpec("gpt-5")
	spec.Temperature = float(0.2)
	spec.MaxOutputTokens = 500
	resp, err := respond(t, p, f, "/v1", &model.Request{
		Spec:   spec,
		APIKey: testKey,
		Messages: []model.Message{
			{Role: model.RoleSystem, Text: "You are careful."},
			{Role: model.RoleSystem, Text: "Constraint: never delete files."},
			{Role: model.RoleUser, Text: "Say hello."},
		},
		OnDelta: got.on,
	})
	require.NoError(t, err)
	require.Equal(t, []string{"Hel", "lo, ", "wor", "ld."}, got.text)
	require.Empty(t, got.reasoning)
	require.Equal(t, "Hello, world.", resp.Text)
	require.Empty(t, resp.ToolCalls)
	require.Nil(t, resp.Reasoning)
	require.Equal(t, responsesModel, resp.Model)
	require.Equal(t, "completed", resp.StopReason)
	require.Equal(t, int64(36), resp.Usage.InputTokens)
	require.Equal(t, int64(87), resp.Usage.OutputTokens)

	calls := f.Calls()
	require.Len(t, calls, 1)
	c := calls[0]
	require.Equal(t, "POST", c.Method)
	require.Equal(t, "/v1/responses", c.Path)
	require.Equal(t, "Bearer "+testKey, c.Header.Get("Authorization"))
	require.Equal(t, true, c.Body["stream"])
	require.Equal(t, false, c.Body["store"])
	require.Equal(t, "gpt-5", c.Body["model"])
	require.Equal(t, 0.2, c.Body["temperature"])
	require.Equal(t, 500.0, c.Body["max_output_tokens"])
	require.JSONEq(t, `["reasoning.encrypted_content"]`, c.JSON(t, "include"))
	require.Equal(t, "You are careful.\n\nConstraint: never delete files.", c.Body["instructions"])
	require.JSONEq(t, `[{"role":"user","content":"Say hello."}]`, c.JSON(t, "input"))
	require.NotContains(t, c.Body, "tools")
	require.NotContains(t, c.Body, "previous_response_id")
}

func TestResponsesToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	fc, seq := functionCallEvents(2, 0, "fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0", "call_unLAR8MvFNptuiZK6K6HCy5k", "get_weather", `{"loca`, `tion":"Paris, Fr`, `ance"}`)
	first := append([]string{created(0), inProgress(1)}, fc...)
	first = append(first, completed(seq, "["+functionCallItem("fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0", "call_unLAR8MvFNptuiZK6K6HCy5k", "get_weather", `{"location":"Paris, France"}`)+"]", usageObject(80, 0, 20, 0)))
	f := newFakeAPI(t, sse(first...), sse(textStream(usageObject(120, 0, 10, 0), "It is sunny.")...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	tools := []model.ToolDef{{
		Name:        "get_weather",
		Description: "Current weather for a place.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","maxLength":100}},"required":["location"]}`),
	}}
	msgs := []model.Message{
		{Role: model.RoleSystem, Text: "Use tools."},
		{Role: model.RoleUser, Text: "Weather in Paris?"},
	}
	var got deltas
	resp, err := respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), Messages: msgs, Tools: tools, APIKey: testKey, OnDelta: got.on})
	require.NoError(t, err)
	require.Empty(t, got.text, "argument deltas are not text")
	require.Equal(t, "", resp.Text)
	require.Equal(t, []model.ToolCall{{ID: "call_unLAR8MvFNptuiZK6K6HCy5k", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris, France"}`)}}, resp.ToolCalls)

	c := f.Calls()[0]
	require.Equal(t, "/responses", c.Path)
	require.JSONEq(t, `[{"type":"function","name":"get_weather","description":"Current weather for a place.","strict":false,
		"parameters":{"type":"object","properties":{"location":{"type":"string","maxLength":100}},"required":["location"]}}]`, c.JSON(t, "tools"))

	// The engine sends the call and its result back.
	msgs = append(msgs,
		model.Message{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls},
		model.Message{Role: model.RoleTool, CallID: "call_unLAR8MvFNptuiZK6K6HCy5k", Text: `{"output":"sunny, 21C"}`},
	)
	resp, err = respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), Messages: msgs, Tools: tools, APIKey: testKey})
	require.NoError(t, err)
	require.Equal(t, "It is sunny.", resp.Text)

	c = f.Calls()[1]
	require.JSONEq(t, `[
		{"role":"user","content":"Weather in Paris?"},
		{"type":"function_call","call_id":"call_unLAR8MvFNptuiZK6K6HCy5k","name":"get_weather","arguments":"{\"location\":\"Paris, France\"}"},
		{"type":"function_call_output","call_id":"call_unLAR8MvFNptuiZK6K6HCy5k","output":"{\"output\":\"sunny, 21C\"}"}
	]`, c.JSON(t, "input"))
}

func TestResponsesParallelToolCalls(t *testing.T) {
	t.Parallel()
	a, seq := functionCallEvents(2, 0, "fc_a", "call_a", "read_file", `{"path":`, `"a.txt"}`)
	b, seq := functionCallEvents(seq, 1, "fc_b", "call_b", "read_file", `{"path":"b.txt"}`)
	frames := append([]string{created(0), inProgress(1)}, a...)
	frames = append(frames, b...)
	frames = append(frames, completed(seq, "["+functionCallItem("fc_a", "call_a", "read_file", `{"path":"a.txt"}`)+","+functionCallItem("fc_b", "call_b", "read_file", `{"path":"b.txt"}`)+"]", usageObject(50, 0, 30, 0)))
	f := newFakeAPI(t, sse(frames...), sse(textStream(usageObject(90, 0, 5, 0), "Both read.")...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	msgs := []model.Message{{Role: model.RoleUser, Text: "Read a.txt and b.txt."}}
	resp, err := respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, []model.ToolCall{
		{ID: "call_a", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)},
		{ID: "call_b", Name: "read_file", Arguments: json.RawMessage(`{"path":"b.txt"}`)},
	}, resp.ToolCalls)

	msgs = append(msgs,
		model.Message{Role: model.RoleAssistant, Text: "Reading both.", ToolCalls: resp.ToolCalls},
		model.Message{Role: model.RoleTool, CallID: "call_a", Text: `{"output":"alpha"}`},
		model.Message{Role: model.RoleTool, CallID: "call_b", Text: `{"error":"no such file"}`, IsError: true},
	)
	_, err = respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), Messages: msgs})
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"user","content":"Read a.txt and b.txt."},
		{"role":"assistant","content":"Reading both."},
		{"type":"function_call","call_id":"call_a","name":"read_file","arguments":"{\"path\":\"a.txt\"}"},
		{"type":"function_call","call_id":"call_b","name":"read_file","arguments":"{\"path\":\"b.txt\"}"},
		{"type":"function_call_output","call_id":"call_a","output":"{\"output\":\"alpha\"}"},
		{"type":"function_call_output","call_id":"call_b","output":"[tool error] {\"error\":\"no such file\"}"}
	]`, f.Calls()[1].JSON(t, "input"))
}

func TestResponsesReasoningKeptAndSentBack(t *testing.T) {
	t.Parallel()
	const encrypted = "gAAAAABoISQ24OyVRYbkYfukrM7qGzJ5cDWk2mF1Yc4Dy_Xm6Mm-8tGhH0Dp9Tz3BzRCmJVq5rQkB7qWOGeSSF0dGUxeIOkMHWAVaXRgGOZ1ijZJA=="
	r, seq := reasoningEvents(2, 0, "rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7", encrypted, "**Checking the file**\n\n", "I should read it first.")
	fc, seq := functionCallEvents(seq, 1, "fc_1", "call_1", "read_file", `{"path":"notes.md"}`)
	frames := append([]string{created(0), inProgress(1)}, r...)
	frames = append(frames, fc...)
	frames = append(frames, completed(seq, "["+reasoningItem("rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7", "**Checking the file**\n\nI should read it first.", encrypted)+","+
		functionCallItem("fc_1", "call_1", "read_file", `{"path":"notes.md"}`)+"]", usageObject(200, 0, 150, 128)))
	f := newFakeAPI(t, sse(frames...), sse(textStream(usageObject(400, 0, 10, 0), "Done.")...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	var got deltas
	msgs := []model.Message{{Role: model.RoleUser, Text: "Summarise notes.md"}}
	resp, err := respond(t, p, f, "", &model.Request{Spec: openaiSpec("o4-mini"), Messages: msgs, OnDelta: got.on})
	require.NoError(t, err)
	require.Equal(t, []string{"**Checking the file**\n\n", "I should read it first."}, got.reasoning)
	require.Equal(t, &model.Reasoning{
		Provider:  NameOpenAI,
		Text:      "**Checking the file**\n\nI should read it first.",
		ID:        "rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7",
		Encrypted: encrypted,
	}, resp.Reasoning)
	require.Equal(t, int64(128), resp.Usage.ReasoningTokens)

	// Sent back before the calls it led to, without its item id; another
	// provider's reasoning is never sent.
	msgs = append(msgs,
		model.Message{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls, Reasoning: resp.Reasoning},
		model.Message{Role: model.RoleTool, CallID: "call_1", Text: "- buy milk"},
		model.Message{Role: model.RoleAssistant, Text: "Earlier answer.", Reasoning: &model.Reasoning{Provider: "anthropic", Text: "thinking", Signature: "sig"}},
		model.Message{Role: model.RoleUser, Text: "And now?"},
	)
	_, err = respond(t, p, f, "", &model.Request{Spec: openaiSpec("o4-mini"), Messages: msgs})
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`[
		{"role":"user","content":"Summarise notes.md"},
		{"type":"reasoning","summary":[{"type":"summary_text","text":"**Checking the file**\n\nI should read it first."}],"encrypted_content":%q},
		{"type":"function_call","call_id":"call_1","name":"read_file","arguments":"{\"path\":\"notes.md\"}"},
		{"type":"function_call_output","call_id":"call_1","output":"- buy milk"},
		{"role":"assistant","content":"Earlier answer."},
		{"role":"user","content":"And now?"}
	]`, encrypted), f.Calls()[1].JSON(t, "input"))
}

func TestResponsesUsageAndCost(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, sse(textStream(usageObject(10_000, 8_000, 2_000, 1_500), "ok")...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	spec := openaiSpec("gpt-5")
	spec.Pricing = json.RawMessage(`{"input_per_mtok":1.25,"cached_input_per_mtok":0.125,"output_per_mtok":10}`)
	resp, err := respond(t, p, f, "", &model.Request{Spec: spec, Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	require.Equal(t, int64(10_000), resp.Usage.InputTokens)
	require.Equal(t, int64(8_000), resp.Usage.CachedInputTokens)
	require.Equal(t, int64(2_000), resp.Usage.OutputTokens)
	require.Equal(t, int64(1_500), resp.Usage.ReasoningTokens)
	// 2,000 uncached input at 1.25, 8,000 cached at 0.125, 2,000 output
	// (reasoning included) at 10, per million tokens.
	require.InDelta(t, (2_000*1.25+8_000*0.125+2_000*10)/1e6, resp.CostUSD, 1e-12)
}

func TestResponsesIncompleteIsAnAnswer(t *testing.T) {
	t.Parallel()
	msg, seq := messageEvents(2, 0, "msg_1", "A long ans")
	frames := append([]string{created(0), inProgress(1)}, msg...)
	frames = append(frames, event(fmt.Sprintf(`{"type":"response.incomplete","sequence_number":%d,"response":%s}`, seq,
		responseObject("incomplete", "["+messageItem("msg_1", "A long ans")+"]", usageObject(10, 0, 16, 0), `{"reason":"max_output_tokens"}`))))
	f := newFakeAPI(t, sse(frames...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	resp, err := respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	require.Equal(t, "A long ans", resp.Text)
	require.Equal(t, "max_output_tokens", resp.StopReason)
}

// The terminal event's output fills what output_item.done did not report, and
// the done items win where both exist (they carry the final encrypted
// reasoning).
func TestResponsesOutputFromDoneItemsAndTerminalEvent(t *testing.T) {
	t.Parallel()
	r, seq := reasoningEvents(2, 0, "rs_1", "ENC-FINAL", "plan")
	frames := append([]string{created(0), inProgress(1)}, r...)
	frames = append(frames, completed(seq, "["+reasoningItem("rs_1", "plan", "")+","+messageItem("msg_1", "from the terminal event")+"]", usageObject(1, 0, 1, 0)))
	f := newFakeAPI(t, sse(frames...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	resp, err := respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	require.Equal(t, "from the terminal event", resp.Text)
	require.Equal(t, "ENC-FINAL", resp.Reasoning.Encrypted)
}

func TestResponsesInvalidArgumentsKeptAsString(t *testing.T) {
	t.Parallel()
	fc, seq := functionCallEvents(2, 0, "fc_1", "call_1", "write_file", `{"path":"a.txt","content":"unterminated`)
	frames := append([]string{created(0), inProgress(1)}, fc...)
	frames = append(frames, completed(seq, "[]", usageObject(1, 0, 1, 0)))
	f := newFakeAPI(t, sse(frames...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})

	resp, err := respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	require.Len(t, resp.ToolCalls, 1)
	require.True(t, json.Valid(resp.ToolCalls[0].Arguments))
	var s string
	require.NoError(t, json.Unmarshal(resp.ToolCalls[0].Arguments, &s))
	require.Equal(t, `{"path":"a.txt","content":"unterminated`, s)
}

func TestResponsesStreamFailures(t *testing.T) {
	t.Parallel()
	msg, seq := messageEvents(2, 0, "msg_1", "Half an ", "answer")
	partial := append([]string{created(0), inProgress(1)}, msg[:3]...)
	tests := []struct {
		name    string
		handler func() []string
		cut     bool
		kind    model.ErrorKind
		want    string
	}{
		{
			name: "connection dropped mid-response", cut: true, kind: model.KindServer, want: "closed in the middle",
			handler: func() []string { return partial },
		},
		{
			name: "stream ends without response.completed", kind: model.KindServer, want: "before response.completed",
			handler: func() []string { return append([]string{created(0), inProgress(1)}, msg...) },
		},
		{
			name: "malformed chunk", kind: model.KindServer, want: "invalid JSON",
			handler: func() []string {
				return append(partial, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\n\n")
			},
		},
		{
			name: "response.failed", kind: model.KindServer, want: "server_error: The model failed to generate a response.",
			handler: func() []string {
				return append(partial, event(fmt.Sprintf(`{"type":"response.failed","sequence_number":%d,"response":%s}`, seq,
					`{"id":"resp_1","object":"response","created_at":1741476777,"status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"incomplete_details":null,"model":"gpt-5","output":[],"usage":null}`)))
			},
		},
		{
			name: "error event: rate limit", kind: model.KindRateLimited, want: "rate_limit_exceeded",
			handler: func() []string {
				return append(partial, event(`{"type":"error","sequence_number":9,"code":"rate_limit_exceeded","message":"Rate limit reached for gpt-5.","param":null}`))
			},
		},
		{
			// A refused key said inside the stream (as gateways do) is
			// permanent: retrying it five times as a server error only
			// delays the person who must fix the key.
			name: "error event: invalid_api_key", kind: model.KindAuth, want: "invalid_api_key: Incorrect API key provided",
			handler: func() []string {
				return append(partial, event(`{"type":"error","sequence_number":9,"code":"invalid_api_key","message":"Incorrect API key provided.","param":null}`))
			},
		},
		{
			name: "error event: context length", kind: model.KindContextTooLong, want: "context",
			handler: func() []string {
				return append(partial, event(`{"type":"error","sequence_number":9,"code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":"input"}`))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := sse(tc.handler()...)
			if tc.cut {
				h = sseCut(tc.handler()...)
			}
			f := newFakeAPI(t, h)
			p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})
			var got deltas
			resp, err := respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), APIKey: testKey, Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}, OnDelta: got.on})
			require.Nil(t, resp, "a broken stream never yields a response")
			me := requireModelError(t, err, tc.kind)
			require.Contains(t, me.Message, tc.want)
			if tc.kind == model.KindServer || tc.kind == model.KindRateLimited {
				require.True(t, me.Retryable())
			}
		})
	}
}
