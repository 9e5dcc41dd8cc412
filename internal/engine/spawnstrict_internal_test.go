package engine

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// TestStrictSpawnArgs: the check runSpawn makes of a journaled call's
// arguments, which are canonical (keys sorted, so "Tools" comes before
// "tools"), and requestCall of the model's own text.
func TestStrictSpawnArgs(t *testing.T) {
	t.Parallel()
	// A path longer than 256 bytes is named by its ends.
	deep := "agent_spec.model.script[0]" + strings.Repeat(".k", 400) + ".a"
	elided := deep[:128] + "…" + deep[len(deep)-128:]
	for _, tc := range []struct {
		name, args, field, message string
	}{
		{"a field in two cases, canonical", `{"agent_spec":{"Tools":[],"tools":[{"name":"shell"}]},"input":"x"}`,
			"agent_spec.Tools", `key "agent_spec.Tools" names the field "tools" in another case: write it as the field is named`},
		{"agent_spec itself in two cases", `{"Agent_Spec":{},"agent_spec":{},"input":"x"}`,
			"Agent_Spec", `key "Agent_Spec" names the field "agent_spec" in another case: write it as the field is named`},
		{"a field in another case alone", `{"agent_spec":{"Tools":[{"name":"shell"}]},"input":"x"}`,
			"agent_spec.Tools", `key "agent_spec.Tools" names the field "tools" in another case: write it as the field is named`},
		{"a field in a case encoding/json folds", `{"agent_spec":{"toolſ":[{"name":"shell"}]},"input":"x"}`,
			"agent_spec.toolſ", `key "agent_spec.toolſ" names the field "tools" in another case: write it as the field is named`},
		{"a key given twice deep down", `{"agent_spec":{"model":{"provider":"scripted","script":[` + strings.Repeat(`{"k":`, 400) + `{"a":1,"a":2}` + strings.Repeat(`}`, 400) + `]}},"input":"x"}`,
			elided, `duplicate key "` + elided + `": each key may be given once in an object`},
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

// TestStrictSpawnArgsOfADeepDocument: a model's spawn arguments nested as
// deep as json.Valid allows (about a megabyte, which the canonical form
// refuses past 1,000 levels, after which they are read again here) are
// read in memory proportional to their size: they once allocated about
// 4.6 GB, enough for a model to take a node down with one call.
func TestStrictSpawnArgsOfADeepDocument(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"input":"go","agent_spec":{"model":{"provider":"scripted","script":`)
	for range 9980 {
		b.WriteString(`{"` + strings.Repeat("k", 95) + `":`)
	}
	b.WriteString(`{"a":1,"a":2}` + strings.Repeat("}", 9980) + `}}}`)
	args := []byte(b.String())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := strictSpawnArgs(args)
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32*len(args)), "allocated to read %d bytes", len(args))
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.LessOrEqual(t, len(ae.Field), 256+len("…"))
	require.True(t, strings.HasSuffix(ae.Field, ".a"), ae.Field)
}
