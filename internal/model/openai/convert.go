package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// ToolErrorMarker starts the text sent for a tool result whose IsError is
// set. Neither API has an error flag on a tool result (function_call_output,
// role "tool"), so the model learns that the call failed from the text.
const ToolErrorMarker = "[tool error] "

// requestError is a request the API cannot be given (an unknown role, a
// tool result without its call id, a tool schema that is not an object). It
// is classified as model.KindBadRequest: the same request would fail again.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...)}
}

// toolResultText is the text sent for a tool result.
func toolResultText(m *model.Message) string {
	if m.IsError {
		return ToolErrorMarker + m.Text
	}
	return m.Text
}

// toolParameters turns a tool's JSON schema into the SDK's parameters map.
// Values stay json.RawMessage, so the schema goes out byte for byte (no
// float64 round trip of its numbers). An empty schema is an object without
// properties: both APIs want an object schema for a function.
func toolParameters(def *model.ToolDef) (map[string]any, error) {
	raw := bytes.TrimSpace(def.Parameters)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var fields map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		return nil, badRequest("tool %q: parameters must be a JSON schema object", def.Name)
	}
	params := make(map[string]any, len(fields))
	for k, v := range fields {
		params[k] = v
	}
	return params, nil
}

// callArguments is the arguments text sent back for a tool call: its JSON,
// or {} when it has none.
func callArguments(c *model.ToolCall) string {
	if len(bytes.TrimSpace(c.Arguments)) == 0 {
		return "{}"
	}
	return string(c.Arguments)
}

// parseArguments turns the arguments a model streamed into a tool call's
// Arguments, which must be valid JSON to be journaled. Empty arguments are
// {}. Arguments that are not valid JSON (a weak model's typo, or a call cut
// by the output limit) are kept as a JSON string holding the text: the
// call's schema check then fails and the model is told so, rather than the
// whole response being lost.
func parseArguments(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// fallbackCallID names a tool call that a server streamed without an id
// (some OpenAI-compatible servers do). It depends only on the request's
// position and the call's index, so a replayed call gets the same id.
func fallbackCallID(position, index int) string {
	return fmt.Sprintf("call_%d_%d", position, index)
}
