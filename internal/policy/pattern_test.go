package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/policy"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestToolPatterns: a tool ending in __* selects every tool with that prefix;
// the agent's tool names may be patterns for tools known only at run time
// (an MCP server's), and policies may then name any tool under them.
func TestToolPatterns(t *testing.T) {
	t.Parallel()
	names := []string{"shell", "docs__*"}
	s, err := policy.Compile([]lt.Policy{
		{Name: "docs read freely", Tool: "docs__*", Decision: lt.PolicyAllow},
		{Name: "no deletes", Tool: "docs__delete_page", Decision: lt.PolicyDeny},
		{Name: "shells ask", Tool: "shell", Decision: lt.PolicyAsk},
	}, names)
	require.NoError(t, err)

	v := s.Evaluate(&policy.Input{Tool: "docs__search"})
	require.Equal(t, lt.PolicyAllow, v.Decision)
	require.Equal(t, "docs read freely", v.Rule)
	v = s.Evaluate(&policy.Input{Tool: "docs__delete_page"})
	require.Equal(t, lt.PolicyDeny, v.Decision)
	require.Equal(t, "no deletes", v.Rule)
	v = s.Evaluate(&policy.Input{Tool: "shell"})
	require.Equal(t, lt.PolicyAsk, v.Decision)
	v = s.Evaluate(&policy.Input{Tool: "other__x"})
	require.Equal(t, policy.Verdict{Decision: lt.PolicyAllow}, v, "nothing selects it")

	require.True(t, s.Names("docs__anything"))
	require.True(t, s.Names("shell"))
	require.False(t, s.Names("other__x"))
	global, err := policy.Compile([]lt.Policy{{Tool: "*", Decision: lt.PolicyAsk}}, names)
	require.NoError(t, err)
	require.False(t, global.Names("docs__search"), "a policy for every tool names none")
	var nilSet *policy.Set
	require.False(t, nilSet.Names("docs__search"))

	for _, tc := range []struct {
		tool string
		want string
	}{
		{"wiki__*", `the agent has no tool "wiki__*"`},
		{"wiki__page", `the agent has no tool "wiki__page"`},
		{"do*s__*", "only a trailing * is allowed"},
		{"sh*", `the agent has no tool "sh*"`},
	} {
		_, err := policy.Compile([]lt.Policy{{Tool: tc.tool, Decision: lt.PolicyAsk}}, names)
		var fe *policy.FieldError
		require.ErrorAs(t, err, &fe, tc.tool)
		require.Equal(t, "policies[0].tool", fe.Field)
		require.Contains(t, fe.Message, tc.want)
	}
	// A pattern selects the agent's named tools under it too.
	_, err = policy.Compile([]lt.Policy{{Tool: "my__*", Decision: lt.PolicyAsk}}, []string{"my__tool"})
	require.NoError(t, err)
}
