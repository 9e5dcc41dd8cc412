package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// TestStrictSpawnArgs: the check runSpawn makes of a journaled call's
// arguments, which are canonical (keys sorted, so "Tools" comes before
// "tools"), and requestCall of the model's own text.
func TestStrictSpawnArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, args, field, message string
	}{
		{"a field in two cases, canonical", `{"agent_spec":{"Tools":[],"tools":[{"name":"shell"}]},"input":"x"}`,
			"agent_spec.tools", `duplicate key "agent_spec.tools": "Tools" names the same field, given earlier in the object`},
		{"agent_spec itself in two cases", `{"Agent_Spec":{},"agent_spec":{},"input":"x"}`,
			"agent_spec", `duplicate key "agent_spec": "Agent_Spec" names the same field, given earlier in the object`},
		{"a key given twice in free-form JSON", `{"agent_spec":{"model":{"provider":"scripted","script":[{"text":"a","text":"b"}]}},"input":"x"}`,
			"agent_spec.model.script[0].text", `duplicate key "agent_spec.model.script[0].text": each key may be given once in an object`},
		{"bytes that are not UTF-8", "{\"agent_spec\":{\"instructions\":\"\xff\"},\"input\":\"x\"}",
			"agent_spec.instructions", `field "agent_spec.instructions" holds invalid UTF-8 at byte offset 31: the arguments must be UTF-8`},
		{"a field a spec does not have", `{"agent_spec":{"model":{"provider":"scripted","modle":"x"}},"input":"x"}`,
			"agent_spec.model.modle", `unknown field "agent_spec.model.modle"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := strictSpawnArgs([]byte(tc.args))
			var ae *apierror.Error
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.field, ae.Field)
			require.Equal(t, tc.message, ae.Message)
		})
	}
	// A spec that reads one way passes; what is not about reading it one
	// way is left to the checks that name it: the canonical form (not
	// JSON), the schema and the decoding (a value of the wrong type).
	for _, args := range []string{
		`{"agent_spec":`,
		`{"input":"x"}`,
		`{"agent_spec":null,"input":"x"}`,
		`{"agent_spec":{"max_steps":"ten"},"input":"x"}`,
		`{"agent":"helper","input":"x","budget":{"max_tool_calls":3}}`,
		`{"agent_spec":{"model":{"provider":"scripted"},"tools":[{"name":"shell"}]},"input":"x"}`,
	} {
		require.NoError(t, strictSpawnArgs([]byte(args)), args)
	}
}
