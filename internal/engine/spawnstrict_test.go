package engine_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// childModel is an inline child's model, for the specs below.
const childModel = `"model":{"provider":"scripted","script":[{"text":"child done"}]}`

// spawnCall is a scripted spawn_agent call of an inline agent_spec, given
// as text, and the text of its arguments.
func spawnCall(spec string) (call, args string) {
	args = `{"agent_spec":` + spec + `,"input":"go"}`
	return `{"name":"spawn_agent","arguments":` + args + `}`, args
}

// TestSpawnAgentSpecReadsOneWay: a model's spawn_agent call whose agent_spec
// another reader would read otherwise than the engine (a log, the web UI, a
// person reading the journal) is refused, naming the path inside
// agent_spec: a key given twice, a field's name in another case, alone
// or beside it ("Tools" for "tools", or "toolſ", whose ſ encoding/json
// folds to s: a case-sensitive reader, a policy's expression among them,
// would see another key), an escaped lone surrogate, and a field an agent spec does not
// have, however deep. No child is made, and the model reads why in the
// call's result.
func TestSpawnAgentSpecReadsOneWay(t *testing.T) {
	h := newHarness(t)
	surrogate := `{` + childModel + `,"instructions":"read \ud800 only"}`
	_, surrogateArgs := spawnCall(surrogate) // the offset is the arguments'
	cases := []struct{ spec, want string }{
		{`{` + childModel + `,"tools":[{"name":"read_file"}],"tools":[{"name":"write_file"}]}`,
			`agent_spec.tools: duplicate key "agent_spec.tools": each key may be given once in an object`},
		{`{` + childModel + `,"tools":[{"name":"read_file"}],"Tools":[{"name":"write_file"}]}`,
			`agent_spec.Tools: key "agent_spec.Tools" names the field "tools" in another case: write it as the field is named`},
		{`{` + childModel + `,"Tools":[{"name":"write_file"}]}`,
			`agent_spec.Tools: key "agent_spec.Tools" names the field "tools" in another case: write it as the field is named`},
		{`{` + childModel + `,"tools":[{"name":"read_file"}],"tool\u017f":[{"name":"write_file"}]}`,
			`agent_spec.toolſ: key "agent_spec.toolſ" names the field "tools" in another case: write it as the field is named`},
		{`{` + childModel + `,"tools":[{"name":"read_file","Name":"write_file"}]}`,
			`agent_spec.tools[0].Name: key "agent_spec.tools[0].Name" names the field "name" in another case: write it as the field is named`},
		{surrogate,
			`agent_spec.instructions: field "agent_spec.instructions" holds an escaped lone surrogate at byte offset ` +
				strconv.Itoa(strings.Index(surrogateArgs, `\ud800`)) + `: it is not valid UTF-16, and would not survive as text`},
		{`{` + childModel + `,"tools":[{"name":"read_file","efect":"read"}]}`,
			`agent_spec.tools[0].efect: unknown field "agent_spec.tools[0].efect"`},
	}
	calls := make([]string, len(cases))
	want := make([]string, len(cases))
	for i, c := range cases {
		calls[i], _ = spawnCall(c.spec)
		want[i] = c.want
	}
	sp := spec(t, `[{"tool_calls":[`+strings.Join(calls, ",")+`]},{"text":"gave up"}]`,
		lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "read_file"}, lt.ToolSpec{Name: "write_file"})
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionIdle)

	require.Equal(t, want, spawnErrors(t, h, s.ID))
	require.Empty(t, events(t, h, s.ID, lt.EventSubagentSpawned))
	require.Empty(t, children(t, h, s.ID))
}
