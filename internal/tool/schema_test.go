package tool_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

const testSchema = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600},
    "mode": {"enum": ["all", "any"]},
    "alt": {"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 1}]},
    "items": {"type": "array", "items": {
      "type": "object",
      "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}},
      "required": ["name"]
    }}
  },
  "required": ["command"],
  "additionalProperties": false
}`

func TestValidateArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    string
		field   string
		pointer string
		message string
	}{
		{"valid", `{"command":"ls","timeout_seconds":5}`, "", "", ""},
		{"integer written as float", `{"command":"ls","timeout_seconds":5.0}`, "", "", ""},
		{"above maximum", `{"command":"ls","timeout_seconds":601}`, "arguments.timeout_seconds", "/timeout_seconds", "must be <= 600"},
		{"below minimum", `{"command":"ls","timeout_seconds":0}`, "arguments.timeout_seconds", "/timeout_seconds", "must be >= 1"},
		{"not an integer", `{"command":"ls","timeout_seconds":1.5}`, "arguments.timeout_seconds", "/timeout_seconds", "must be integer, got number"},
		{"wrong type", `{"command":42}`, "arguments.command", "/command", "must be string, got number"},
		{"missing required", `{}`, "arguments.command", "/command", "is required"},
		{"empty means {}", ``, "arguments.command", "/command", "is required"},
		{"too short", `{"command":""}`, "arguments.command", "/command", "must be at least 1 characters long"},
		{"unknown field", `{"command":"ls","comand":"x"}`, "arguments.comand", "/comand", "is not an allowed field"},
		{"enum", `{"command":"ls","mode":"some"}`, "arguments.mode", "/mode", `must be one of "all", "any"`},
		{"nested array field", `{"command":"ls","items":[{"name":"ok"},{"name":"Bad"}]}`, "arguments.items[1].name", "/items/1/name", `must match the pattern "^[a-z]+$"`},
		{"nested required", `{"command":"ls","items":[{}]}`, "arguments.items[0].name", "/items/0/name", "is required"},
		{"not an object", `["ls"]`, "arguments", "", "must be a JSON object, got array"},
		{"not JSON", `{"command":`, "arguments", "", "not valid JSON"},
		{"oneOf types merged", `{"command":"ls","alt":true}`, "arguments.alt", "/alt", "must be integer or string, got boolean"},
		{"oneOf range beats type", `{"command":"ls","alt":0}`, "arguments.alt", "/alt", "must be >= 1"},
		// Several problems: the first by field path is reported, whatever
		// order the validator found them in.
		{"first of several", `{"timeout_seconds":9999,"command":1}`, "arguments.command", "/command", "must be string, got number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tool.ValidateArguments(json.RawMessage(testSchema), json.RawMessage(tc.args))
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *tool.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
			require.Equal(t, tc.pointer, fe.Pointer)
			require.Contains(t, fe.Message, tc.message)
			require.Equal(t, fe.Field+": "+fe.Message, err.Error())
		})
	}
}

func TestValidateArgumentsIsDeterministic(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"a":1,"b":1,"c":1,"d":1,"e":1,"command":"x"}`)
	first := tool.ValidateArguments(json.RawMessage(testSchema), args)
	require.Error(t, first)
	for range 20 {
		require.Equal(t, first.Error(), tool.ValidateArguments(json.RawMessage(testSchema), args).Error())
	}
	require.Equal(t, "arguments.a: is not an allowed field", first.Error())
}

func TestCompileSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		schema  string
		field   string
		message string
	}{
		{"valid", testSchema, "", ""},
		{"empty object", `{}`, "", ""},
		{"internal ref", `{"type":"object","$defs":{"n":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`, "", ""},
		{"bad property type", `{"type":"object","properties":{"count":{"type":"integr"}}}`, "parameters.properties.count.type", `must be one of "array", "boolean", "integer"`},
		{"bad keyword value", `{"type":"object","properties":{"n":{"type":"string","minLength":-1}}}`, "parameters.properties.n.minLength", "must be >= 0"},
		{"required not an array", `{"type":"object","required":"a"}`, "parameters.required", "must be array, got string"},
		{"not an object schema", `{"type":"string"}`, "parameters.type", `must be "object"`},
		{"boolean schema", `true`, "parameters", "must be a JSON object"},
		{"not JSON", `{"type":`, "parameters", "not valid JSON"},
		{"duplicate key", `{"type":"object","type":"object"}`, "parameters", "duplicate object key"},
		{"file ref", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "parameters", "references to other documents are not allowed"},
		{"http ref", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "parameters", "references to other documents are not allowed"},
		{"remote metaschema", `{"$schema":"https://example.com/meta","type":"object"}`, "parameters", "references to other documents are not allowed"},
		{"bad regex", `{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`, "parameters.properties.a.pattern", "not valid regex"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tool.CompileSchema(json.RawMessage(tc.schema))
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *tool.FieldError
			require.ErrorAs(t, err, &fe, "%v", err)
			require.Equal(t, tc.field, fe.Field, fe.Error())
			require.Contains(t, fe.Message, tc.message)
			require.NotContains(t, fe.Message, "mem://", "internal URL leaked")
		})
	}
}

func TestValidateArgumentsWithBadSchema(t *testing.T) {
	t.Parallel()
	err := tool.ValidateArguments(json.RawMessage(`{"type":"object","properties":{"a":{"type":7}}}`), json.RawMessage(`{}`))
	var fe *tool.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "parameters.properties.a.type", fe.Field)
}
