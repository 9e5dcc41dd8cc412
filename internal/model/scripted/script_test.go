package scripted

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
)

func ptr[T any](v T) *T { return &v }

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		want   []Step
	}{
		{
			name:   "final text",
			script: `[{"text": "Done."}]`,
			want:   []Step{{Text: "Done."}},
		},
		{
			name:   "the API.md example",
			script: `[{"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "…"}}]}, {"tool_calls": [{"name": "send_email", "arguments": {"to": "a@b.c"}}]}, {"text": "Done: notes.md written and email sent.", "usage": {"input_tokens": 900, "output_tokens": 40}}]`,
			want: []Step{
				{ToolCalls: []ToolCall{{Name: "write_file", Arguments: json.RawMessage(`{"path":"notes.md","content":"…"}`)}}},
				{ToolCalls: []ToolCall{{Name: "send_email", Arguments: json.RawMessage(`{"to":"a@b.c"}`)}}},
				{Text: "Done: notes.md written and email sent.", Usage: &Usage{InputTokens: ptr[int64](900), OutputTokens: ptr[int64](40)}},
			},
		},
		{
			name:   "text next to tool calls, arguments default to {} and keep their order, compacted",
			script: `[{"text": "Looking.", "tool_calls": [{"name": "list_files"}, {"name": "read_file", "arguments": { "path" : "b", "limit": 10 }, "id": "toolu_1"}]}]`,
			want: []Step{{Text: "Looking.", ToolCalls: []ToolCall{
				{Name: "list_files", Arguments: json.RawMessage(`{}`)},
				{Name: "read_file", Arguments: json.RawMessage(`{"path":"b","limit":10}`), ID: "toolu_1"},
			}}},
		},
		{
			name:   "arguments escaped as encoding/json writes them",
			script: `[{"tool_calls": [{"name": "shell", "arguments": {"command": "a < b && c > d"}}]}]`,
			want: []Step{{ToolCalls: []ToolCall{
				{Name: "shell", Arguments: json.RawMessage(`{"command":"a \u003c b \u0026\u0026 c \u003e d"}`)},
			}}},
		},
		{
			name:   "every usage field, cost, delay",
			script: `[{"text": "x", "usage": {"input_tokens": 1000, "output_tokens": 300, "cached_input_tokens": 800, "reasoning_tokens": 200}, "cost_usd": 0.25, "delay_ms": 1500}]`,
			want: []Step{{Text: "x", Usage: &Usage{
				InputTokens: ptr[int64](1000), OutputTokens: ptr[int64](300),
				CachedInputTokens: ptr[int64](800), ReasoningTokens: ptr[int64](200),
			}, CostUSD: ptr(0.25), DelayMS: 1500}},
		},
		{
			name:   "partial and empty usage, zero cost, zero delay",
			script: `[{"text": "a", "usage": {"output_tokens": 0}, "cost_usd": 0, "delay_ms": 0}, {"text": "b", "usage": {}}]`,
			want: []Step{
				{Text: "a", Usage: &Usage{OutputTokens: ptr[int64](0)}, CostUSD: ptr(0.0)},
				{Text: "b", Usage: &Usage{}},
			},
		},
		{
			name:   "whole numbers written with a fraction or an exponent",
			script: `[{"text": "a", "delay_ms": 1e3, "usage": {"input_tokens": 5.0}}, {"error": {"status": 4.29e2}}]`,
			want: []Step{
				{Text: "a", DelayMS: 1000, Usage: &Usage{InputTokens: ptr[int64](5)}},
				{Error: &StepError{Status: 429}},
			},
		},
		{
			name:   "limits are inclusive",
			script: `[{"text": "a", "delay_ms": 600000, "cost_usd": 1000000, "usage": {"input_tokens": 1000000000000, "output_tokens": 0}}, {"error": {"status": 599, "retry_after_seconds": 86400}}, {"error": {"status": 400, "retry_after_seconds": 0}}]`,
			want: []Step{
				{Text: "a", DelayMS: MaxDelayMS, CostUSD: ptr(float64(MaxCostUSD)), Usage: &Usage{InputTokens: ptr[int64](MaxTokens), OutputTokens: ptr[int64](0)}},
				{Error: &StepError{Status: 599, RetryAfterSeconds: MaxRetryAfterSeconds}},
				{Error: &StepError{Status: 400}},
			},
		},
		{
			name:   "error steps",
			script: `[{"error": {"status": 429, "retry_after_seconds": 1.5}}, {"error": {"status": 500, "message": "upstream exploded"}, "delay_ms": 20}]`,
			want: []Step{
				{Error: &StepError{Status: 429, RetryAfterSeconds: 1.5}},
				{Error: &StepError{Status: 500, Message: "upstream exploded"}, DelayMS: 20},
			},
		},
		{
			name:   "empty text next to tool calls, empty tool_calls next to text",
			script: `[{"text": "", "tool_calls": [{"name": "a"}]}, {"text": "b", "tool_calls": []}]`,
			want: []Step{
				{ToolCalls: []ToolCall{{Name: "a", Arguments: json.RawMessage(`{}`)}}},
				{Text: "b"},
			},
		},
		{
			name:   "a given id may look generated if no call gets that id",
			script: `[{"tool_calls": [{"name": "a", "id": "call_1_0"}]}, {"text": "done"}]`,
			want: []Step{
				{ToolCalls: []ToolCall{{Name: "a", Arguments: json.RawMessage(`{}`), ID: "call_1_0"}}},
				{Text: "done"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(json.RawMessage(tt.script))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)

			// What Parse returns reads back as itself.
			b, err := json.Marshal(got)
			require.NoError(t, err)
			again, err := Parse(b)
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		want   string // Field + ": " + Message
	}{
		// The script itself.
		{"absent", ``, "script: required"},
		{"blank", " \n", "script: required"},
		{"not JSON", `[{"text": "a"`, "script: must be valid JSON"},
		{"null", `null`, "script: must be an array of steps"},
		{"object", `{"text": "a"}`, "script: must be an array of steps"},
		{"empty", `[]`, "script: must have at least one step"},

		// A step.
		{"step not an object", `[{"text": "a"}, "b"]`, "script[1]: must be an object"},
		{"step null", `[null]`, "script[0]: must be an object"},
		{"unknown field", `[{"text": "a", "txt": "b"}]`, "script[0].txt: unknown field"},
		{"first unknown field in order", `[{"text": "a", "zz": 1, "aa": 2}]`, "script[0].aa: unknown field"},
		{"unknown field with an odd name", `[{"text": "a", "tool calls": []}]`, `script[0]["tool calls"]: unknown field`},
		{"nothing to answer", `[{"usage": {"input_tokens": 1, "output_tokens": 1}}]`, "script[0]: must have text, tool_calls or error"},
		{"empty object", `[{"text": "a"}, {}]`, "script[1]: must have text, tool_calls or error"},
		{"empty text only", `[{"text": ""}]`, "script[0]: must have text, tool_calls or error"},
		{"empty tool_calls only", `[{"tool_calls": []}]`, "script[0]: must have text, tool_calls or error"},

		// text.
		{"text number", `[{"text": 5}]`, "script[0].text: must be a string"},
		{"text null", `[{"text": null}]`, "script[0].text: must be a string"},

		// tool_calls.
		{"tool_calls object", `[{"tool_calls": {"name": "a"}}]`, "script[0].tool_calls: must be an array"},
		{"tool call not an object", `[{"tool_calls": ["a"]}]`, "script[0].tool_calls[0]: must be an object"},
		{"tool call unknown field", `[{"tool_calls": [{"name": "a", "args": {}}]}]`, "script[0].tool_calls[0].args: unknown field"},
		{"tool call name missing", `[{"text": "a"}, {"text": "b"}, {"tool_calls": [{"arguments": {}}]}]`, "script[2].tool_calls[0].name: required"},
		{"tool call name empty", `[{"tool_calls": [{"name": "a"}, {"name": ""}]}]`, "script[0].tool_calls[1].name: required"},
		{"tool call name number", `[{"tool_calls": [{"name": 1}]}]`, "script[0].tool_calls[0].name: must be a string"},
		{"arguments array", `[{"tool_calls": [{"name": "a", "arguments": [1]}]}]`, "script[0].tool_calls[0].arguments: must be a JSON object"},
		{"arguments string", `[{"tool_calls": [{"name": "a", "arguments": "{\"x\":1}"}]}]`, "script[0].tool_calls[0].arguments: must be a JSON object"},
		{"arguments null", `[{"tool_calls": [{"name": "a", "arguments": null}]}]`, "script[0].tool_calls[0].arguments: must be a JSON object"},
		{"id number", `[{"tool_calls": [{"name": "a", "id": 7}]}]`, "script[0].tool_calls[0].id: must be a string"},
		{"id empty", `[{"tool_calls": [{"name": "a", "id": ""}]}]`, "script[0].tool_calls[0].id: must not be empty"},
		{"id twice in a step", `[{"tool_calls": [{"name": "a", "id": "x"}, {"name": "b", "id": "x"}]}]`,
			`script[0].tool_calls[1].id: "x" is already the id of script[0].tool_calls[0]`},
		{"id twice in the script", `[{"tool_calls": [{"name": "a", "id": "x"}]}, {"tool_calls": [{"name": "b", "id": "x"}]}]`,
			`script[1].tool_calls[0].id: "x" is already the id of script[0].tool_calls[0]`},
		{"id equal to a generated one", `[{"tool_calls": [{"name": "a", "id": "call_1_0"}]}, {"tool_calls": [{"name": "b"}]}]`,
			`script[0].tool_calls[0].id: "call_1_0" is the id generated for script[1].tool_calls[0]`},

		// usage.
		{"usage not an object", `[{"text": "a", "usage": 5}]`, "script[0].usage: must be an object"},
		{"usage null", `[{"text": "a", "usage": null}]`, "script[0].usage: must be an object"},
		{"usage unknown field", `[{"text": "a", "usage": {"total_tokens": 5}}]`, "script[0].usage.total_tokens: unknown field"},
		{"input_tokens negative", `[{"text": "a", "usage": {"input_tokens": -1}}]`, "script[0].usage.input_tokens: must be >= 0 and <= 1000000000000"},
		{"output_tokens too large", `[{"text": "a", "usage": {"output_tokens": 1000000000001}}]`, "script[0].usage.output_tokens: must be >= 0 and <= 1000000000000"},
		{"output_tokens beyond float64", `[{"text": "a", "usage": {"output_tokens": 1e999}}]`, "script[0].usage.output_tokens: must be >= 0 and <= 1000000000000"},
		{"input_tokens fraction", `[{"text": "a", "usage": {"input_tokens": 1.5}}]`, "script[0].usage.input_tokens: must be an integer"},
		{"input_tokens string", `[{"text": "a", "usage": {"input_tokens": "10"}}]`, "script[0].usage.input_tokens: must be an integer"},
		{"cached_input_tokens negative", `[{"text": "a", "usage": {"input_tokens": 5, "cached_input_tokens": -1}}]`, "script[0].usage.cached_input_tokens: must be >= 0 and <= 1000000000000"},
		{"reasoning_tokens bool", `[{"text": "a", "usage": {"output_tokens": 5, "reasoning_tokens": true}}]`, "script[0].usage.reasoning_tokens: must be an integer"},
		{"cached without input", `[{"text": "a", "usage": {"cached_input_tokens": 5}}]`, "script[0].usage.cached_input_tokens: requires input_tokens"},
		{"cached above input", `[{"text": "a", "usage": {"input_tokens": 5, "cached_input_tokens": 6}}]`, "script[0].usage.cached_input_tokens: must be <= input_tokens"},
		{"reasoning without output", `[{"text": "a", "usage": {"reasoning_tokens": 5}}]`, "script[0].usage.reasoning_tokens: requires output_tokens"},
		{"reasoning above output", `[{"text": "a", "usage": {"output_tokens": 5, "reasoning_tokens": 6}}]`, "script[0].usage.reasoning_tokens: must be <= output_tokens"},

		// cost_usd.
		{"cost string", `[{"text": "a", "cost_usd": "0.1"}]`, "script[0].cost_usd: must be a number"},
		{"cost negative", `[{"text": "a", "cost_usd": -0.01}]`, "script[0].cost_usd: must be >= 0 and <= 1000000"},
		{"cost too large", `[{"text": "a", "cost_usd": 1000000.5}]`, "script[0].cost_usd: must be >= 0 and <= 1000000"},

		// delay_ms.
		{"delay negative", `[{"text": "a", "delay_ms": -1}]`, "script[0].delay_ms: must be >= 0 and <= 600000"},
		{"delay too long", `[{"text": "a", "delay_ms": 600001}]`, "script[0].delay_ms: must be >= 0 and <= 600000"},
		{"delay fraction", `[{"text": "a", "delay_ms": 0.5}]`, "script[0].delay_ms: must be an integer"},
		{"delay null", `[{"text": "a", "delay_ms": null}]`, "script[0].delay_ms: must be an integer"},

		// error.
		{"error not an object", `[{"error": 429}]`, "script[0].error: must be an object"},
		{"error unknown field", `[{"error": {"status": 429, "code": "x"}}]`, "script[0].error.code: unknown field"},
		{"status missing", `[{"error": {"retry_after_seconds": 1}}]`, "script[0].error.status: required"},
		{"status not an error", `[{"text": "a"}, {"error": {"status": 200}}]`, "script[1].error.status: must be an HTTP error status (400-599)"},
		{"status 600", `[{"error": {"status": 600}}]`, "script[0].error.status: must be an HTTP error status (400-599)"},
		{"status string", `[{"error": {"status": "429"}}]`, "script[0].error.status: must be an integer"},
		{"retry_after negative", `[{"error": {"status": 429, "retry_after_seconds": -1}}]`, "script[0].error.retry_after_seconds: must be >= 0 and <= 86400"},
		{"retry_after too long", `[{"error": {"status": 429, "retry_after_seconds": 86401}}]`, "script[0].error.retry_after_seconds: must be >= 0 and <= 86400"},
		{"retry_after string", `[{"error": {"status": 429, "retry_after_seconds": "1"}}]`, "script[0].error.retry_after_seconds: must be a number"},
		{"message number", `[{"error": {"status": 500, "message": 1}}]`, "script[0].error.message: must be a string"},
		{"error with text", `[{"error": {"status": 500}, "text": "a"}]`, "script[0].text: not allowed in an error step"},
		{"error with empty text", `[{"error": {"status": 500}, "text": ""}]`, "script[0].text: not allowed in an error step"},
		{"error with tool_calls", `[{"error": {"status": 500}, "tool_calls": [{"name": "a"}]}]`, "script[0].tool_calls: not allowed in an error step"},
		{"error with usage", `[{"error": {"status": 500}, "usage": {}}]`, "script[0].usage: not allowed in an error step"},
		{"error with cost", `[{"error": {"status": 500}, "cost_usd": 1}]`, "script[0].cost_usd: not allowed in an error step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			steps, err := Parse(json.RawMessage(tt.script))
			require.Nil(t, steps)
			var fe *model.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.want, fe.Field+": "+fe.Message)
			require.Equal(t, tt.want, err.Error())
		})
	}
}
