package anthropic

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestRespondText(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, streamBody(fixture(t, "text.sse")))
	var deltas []model.Delta
	req := &model.Request{
		Spec: api.spec(),
		Messages: []model.Message{
			{Role: model.RoleSystem, Text: "You are a careful agent."},
			{Role: model.RoleSystem, Text: "Constraint: never delete files."},
			{Role: model.RoleUser, Text: "Say hello."},
		},
		APIKey:  testKey,
		OnDelta: func(d model.Delta) { deltas = append(deltas, d) },
	}

	resp, err := api.provider().Respond(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, &model.Response{
		Text:       "Hello, world!",
		Usage:      lt.Usage{InputTokens: 25, OutputTokens: 15},
		CostUSD:    model.CostOf(req.Spec, lt.Usage{InputTokens: 25, OutputTokens: 15}),
		Model:      "claude-sonnet-4-5-20250929",
		StopReason: "end_turn",
	}, resp)
	require.Equal(t, []model.Delta{{Text: "Hello"}, {Text: ", world"}, {Text: "!"}}, deltas)

	got := api.only(t)
	require.Equal(t, "POST", got.Method)
	require.Equal(t, "/v1/messages", got.Path)
	require.Equal(t, testKey, got.Header.Get("x-api-key"))
	require.Equal(t, "Bearer "+testKey, got.Header.Get("Authorization"))
	require.NotEmpty(t, got.Header.Get("anthropic-version"))
	require.Equal(t, decode(t, `{
		"model": "claude-sonnet-4-5",
		"max_tokens": 8192,
		"stream": true,
		"system": [
			{"type": "text", "text": "You are a careful agent."},
			{"type": "text", "text": "Constraint: never delete files."}
		],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}
		]
	}`), any(got.Body))
}

func TestRespondWithoutKeySendsNoCredential(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, streamBody(fixture(t, "text.sse")))
	req := &model.Request{Spec: api.spec(), Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}
	_, err := api.provider().Respond(context.Background(), req)
	require.NoError(t, err)
	got := api.only(t)
	require.Empty(t, got.Header.Get("x-api-key"))
	require.Empty(t, got.Header.Get("Authorization"))
}

func TestRespondToolRoundTrip(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, streamBody(fixture(t, "tool_use.sse")))
	spec := api.spec()
	spec.MaxOutputTokens = 1024
	req := &model.Request{
		Spec: spec,
		Messages: []model.Message{
			{Role: model.RoleSystem, Text: "Use tools."},
			{Role: model.RoleUser, Text: "Weather in SF, and is the sensor up?"},
			{Role: model.RoleAssistant, Text: "Checking.", ToolCalls: []model.ToolCall{
				{ID: "toolu_01", Name: "sensor_status", Arguments: json.RawMessage(`{"id":"sf-1"}`)},
			}},
			{Role: model.RoleTool, CallID: "toolu_01", Text: "sensor sf-1 unreachable", IsError: true},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
				{ID: "toolu_02", Name: "ping", Arguments: nil},
			}},
			{Role: model.RoleTool, CallID: "toolu_02", Text: `{"output":"pong"}`},
		},
		Tools: []model.ToolDef{
			{
				Name:        "get_weather",
				Description: "Get the current weather in a given location",
				Parameters:  json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`),
			},
			{Name: "ping", Parameters: json.RawMessage(`{"properties":{}}`)},
			{Name: "sensor_status"},
		},
		APIKey: testKey,
	}

	resp, err := api.provider().Respond(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "Okay, let's check the weather for San Francisco, CA:", resp.Text)
	require.Equal(t, "tool_use", resp.StopReason)
	require.Len(t, resp.ToolCalls, 1)
	require.Equal(t, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", resp.ToolCalls[0].ID)
	require.Equal(t, "get_weather", resp.ToolCalls[0].Name)
	require.JSONEq(t, `{"location": "San Francisco, CA", "unit": "fahrenheit"}`, string(resp.ToolCalls[0].Arguments))
	require.Equal(t, lt.Usage{InputTokens: 472, OutputTokens: 89}, resp.Usage)

	got := api.only(t)
	require.Equal(t, decode(t, `{
		"model": "claude-sonnet-4-5",
		"max_tokens": 1024,
		"stream": true,
		"system": [{"type": "text", "text": "Use tools."}],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "Weather in SF, and is the sensor up?"}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Checking."},
				{"type": "tool_use", "id": "toolu_01", "name": "sensor_status", "input": {"id": "sf-1"}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_01", "is_error": true,
				 "content": [{"type": "text", "text": "sensor sf-1 unreachable"}]}
			]},
			{"role": "assistant", "content": [
				{"type": "tool_use", "id": "toolu_02", "name": "ping", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_02",
				 "content": [{"type": "text", "text": "{\"output\":\"pong\"}"}]}
			]}
		],
		"tools": [
			{"name": "get_weather", "description": "Get the current weather in a given location",
			 "input_schema": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}},
			{"name": "ping", "input_schema": {"type": "object", "properties": {}}},
			{"name": "sensor_status", "input_schema": {"type": "object", "properties": {}}}
		]
	}`), any(got.Body))
}

func TestRespondParallelToolCalls(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, streamBody(fixture(t, "parallel_tools.sse")))
	req := &model.Request{
		Spec: api.spec(),
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "Look around."},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
				{ID: "toolu_a", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.md"}`)},
				{ID: "toolu_b", Name: "read_file", Arguments: json.RawMessage(`{"path":"b.md"}`)},
			}},
			{Role: model.RoleTool, CallID: "toolu_a", Text: "A"},
			{Role: model.RoleTool, CallID: "toolu_b", Text: "no such file", IsError: true},
			{Role: model.RoleUser, Text: "Also list the files."},
		},
		APIKey: testKey,
	}

	resp, err := api.provider().Respond(context.Background(), req)
	require.NoError(t, err)
	require.Empty(t, resp.Text)
	require.Equal(t, []model.ToolCall{
		{ID: "toolu_01A", Name: "read_file", Arguments: json.RawMessage(`{"path": "notes.md"}`)},
		// No input_json_delta at all: the input is {}.
		{ID: "toolu_01B", Name: "list_files", Arguments: json.RawMessage(`{}`)},
	}, resp.ToolCalls)
	require.Equal(t, lt.Usage{InputTokens: 31, OutputTokens: 40}, resp.Usage)

	got := api.only(t)
	require.Equal(t, decode(t, `[
		{"role": "user", "content": [{"type": "text", "text": "Look around."}]},
		{"role": "assistant", "content": [
			{"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.md"}},
			{"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "b.md"}}
		]},
		{"role": "user", "content": [
			{"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "A"}]},
			{"type": "tool_result", "tool_use_id": "toolu_b", "is_error": true, "content": [{"type": "text", "text": "no such file"}]},
			{"type": "text", "text": "Also list the files."}
		]}
	]`), got.Body["messages"])
}

func TestRespondThinkingKeptAndSentBack(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, streamBody(fixture(t, "thinking.sse")))
	var deltas []model.Delta
	first := &model.Request{
		Spec:     api.spec(),
		Messages: []model.Message{{Role: model.RoleUser, Text: "What is in a.txt?"}},
		APIKey:   testKey,
		OnDelta:  func(d model.Delta) { deltas = append(deltas, d) },
	}
	p := api.provider()
	resp, err := p.Respond(context.Background(), first)
	require.NoError(t, err)

	wantReasoning := &model.Reasoning{
		Provider:  "anthropic",
		Text:      "I need the file first. Then I can answer.",
		Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
		Redacted:  []string{"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
	}
	require.Equal(t, wantReasoning, resp.Reasoning)
	require.Equal(t, "Reading it.", resp.Text)
	require.Equal(t, []model.ToolCall{{ID: "toolu_01Think", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}, resp.ToolCalls)
	require.Equal(t, lt.Usage{InputTokens: 28, OutputTokens: 106, ReasoningTokens: 67}, resp.Usage)
	require.Equal(t, []model.Delta{
		{Reasoning: "I need the file first. "},
		{Reasoning: "Then I can answer."},
		{Text: "Reading it."},
	}, deltas)

	// The tool loop goes on: the assistant turn goes back with its thinking
	// first, signature intact.
	second := &model.Request{
		Spec: api.spec(),
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "What is in a.txt?"},
			{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls, Reasoning: resp.Reasoning},
			{Role: model.RoleTool, CallID: "toolu_01Think", Text: "hello"},
			// Reasoning from another provider is never sent to Anthropic.
			{Role: model.RoleAssistant, Text: "It says hello.", Reasoning: &model.Reasoning{Provider: "openai", ID: "rs_1", Encrypted: "gAAA"}},
			{Role: model.RoleUser, Text: "Thanks."},
		},
		APIKey: testKey,
	}
	_, err = p.Respond(context.Background(), second)
	require.NoError(t, err)

	api.mu.Lock()
	require.Len(t, api.requests, 2)
	sent := api.requests[1].Body["messages"]
	api.mu.Unlock()
	require.Equal(t, decode(t, `[
		{"role": "user", "content": [{"type": "text", "text": "What is in a.txt?"}]},
		{"role": "assistant", "content": [
			{"type": "thinking", "thinking": "I need the file first. Then I can answer.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
			{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
			{"type": "text", "text": "Reading it."},
			{"type": "tool_use", "id": "toolu_01Think", "name": "read_file", "input": {"path": "a.txt"}}
		]},
		{"role": "user", "content": [
			{"type": "tool_result", "tool_use_id": "toolu_01Think", "content": [{"type": "text", "text": "hello"}]}
		]},
		{"role": "assistant", "content": [{"type": "text", "text": "It says hello."}]},
		{"role": "user", "content": [{"type": "text", "text": "Thanks."}]}
	]`), sent)
}

func TestRespondUsageWithCacheAndCost(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, streamBody(fixture(t, "cache_usage.sse")))
	spec := api.spec()
	spec.Pricing = json.RawMessage(`{"input_per_mtok": 3, "cached_input_per_mtok": 0.3, "output_per_mtok": 15}`)
	req := &model.Request{Spec: spec, Messages: []model.Message{{Role: model.RoleUser, Text: "Again."}}, APIKey: testKey}

	resp, err := api.provider().Respond(context.Background(), req)
	require.NoError(t, err)
	// input 100 + cache read 2000 + cache write 300; output from message_delta.
	require.Equal(t, lt.Usage{InputTokens: 2400, CachedInputTokens: 2000, OutputTokens: 500}, resp.Usage)
	// (400 × 3 + 2000 × 0.3 + 500 × 15) / 1e6
	require.InDelta(t, 0.0093, resp.CostUSD, 1e-12)
}

func TestRespondUsageFromMessageDeltaReplacesStart(t *testing.T) {
	t.Parallel()
	// message_delta's counts are cumulative: where it repeats input counts,
	// they replace message_start's rather than add to them.
	body := events(
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-haiku-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":5,"cache_read_input_tokens":40,"output_tokens":3}}`,
		`{"type":"message_stop"}`,
	)
	api := newFakeAPI(t, streamBody(body))
	resp, err := api.provider().Respond(context.Background(), &model.Request{Spec: api.spec(), Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}})
	require.NoError(t, err)
	require.Equal(t, lt.Usage{InputTokens: 57, CachedInputTokens: 40, OutputTokens: 3}, resp.Usage)
}

func TestRespondMaxTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec lt.ModelSpec
		want float64
	}{
		{"default", lt.ModelSpec{Name: "claude-sonnet-4-5"}, DefaultMaxOutputTokens},
		{"smaller model limit", lt.ModelSpec{Name: "claude-3-haiku-20240307"}, 4096},
		{"from the spec", lt.ModelSpec{Name: "claude-3-haiku-20240307", MaxOutputTokens: 1000}, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, streamBody(fixture(t, "text.sse")))
			spec := tt.spec
			spec.Provider = ProviderName
			spec.BaseURL = api.srv.URL
			_, err := api.provider().Respond(context.Background(), &model.Request{Spec: spec, Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}})
			require.NoError(t, err)
			require.Equal(t, tt.want, api.only(t).Body["max_tokens"])
		})
	}
}

func TestRespondBaseURLWithPath(t *testing.T) {
	t.Parallel()
	// A gateway that serves the API under a prefix.
	api := newFakeAPI(t, streamBody(fixture(t, "text.sse")))
	spec := api.spec()
	spec.BaseURL = api.srv.URL + "/anthropic"
	_, err := api.provider().Respond(context.Background(), &model.Request{Spec: spec, Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}})
	require.NoError(t, err)
	require.Equal(t, "/anthropic/v1/messages", api.only(t).Path)
}

func TestRespondRefusesBadRequestsWithoutCalling(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, streamBody(fixture(t, "text.sse")))
	tests := []struct {
		name string
		req  *model.Request
		want string
	}{
		{"tool result without call id", &model.Request{Spec: api.spec(), Messages: []model.Message{{Role: model.RoleTool, Text: "x"}}}, "messages[0]: tool result without call_id"},
		{"unknown role", &model.Request{Spec: api.spec(), Messages: []model.Message{{Role: "narrator", Text: "x"}}}, `messages[0]: unknown role "narrator"`},
		{"bad tool call arguments", &model.Request{Spec: api.spec(), Messages: []model.Message{{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Name: "ls", Arguments: json.RawMessage(`{"p":`)}}}}}, "messages[0]: tool_calls[0] (ls): arguments are not valid JSON"},
		{"tool call without id", &model.Request{Spec: api.spec(), Messages: []model.Message{{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{Name: "ls"}}}}}, "messages[0]: tool_calls[0]: id and name are required"},
		{"schema not an object", &model.Request{Spec: api.spec(), Tools: []model.ToolDef{{Name: "ls", Parameters: json.RawMessage(`[1]`)}}}, "tools[0] (ls): parameters must be a JSON schema object"},
		{"invalid spec", &model.Request{Spec: lt.ModelSpec{Provider: ProviderName}}, "invalid model spec: name: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := api.provider().Respond(context.Background(), tt.req)
			require.Nil(t, resp)
			me := requireModelError(t, err, model.KindBadRequest)
			require.False(t, me.Retryable())
			require.Contains(t, me.Message, tt.want)
		})
	}
	require.Zero(t, api.count())

	_, err := api.provider().Respond(context.Background(), nil)
	require.EqualError(t, err, "anthropic respond: nil request")
}
