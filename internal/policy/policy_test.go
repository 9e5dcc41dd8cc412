package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/policy"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var agentTools = []string{"send_email", "pay", "deploy", "run_tests", "shell"}

func TestCompileEmpty(t *testing.T) {
	t.Parallel()
	for _, policies := range [][]lt.Policy{nil, {}} {
		s, err := policy.Compile(policies, agentTools)
		require.NoError(t, err)
		require.True(t, s.Empty())
		require.False(t, s.NeedsEffects())
		v := s.Evaluate(&policy.Input{Tool: "pay", Arguments: []byte(`{"amount_usd":1e9}`)})
		require.Equal(t, policy.Verdict{Decision: lt.PolicyAllow}, v)
	}
	// A nil Set behaves as an empty one, so callers need no special case.
	var nilSet *policy.Set
	require.True(t, nilSet.Empty())
	require.False(t, nilSet.NeedsEffects())
	require.Equal(t, lt.PolicyAllow, nilSet.Evaluate(nil).Decision)
}

func TestCompileAccepts(t *testing.T) {
	t.Parallel()
	policies := []lt.Policy{
		{Name: "no-spam", Tool: "send_email", When: `count(effects, e.tool == "send_email") >= 3`, Decision: lt.PolicyDeny},
		{Tool: "pay", When: `sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100`, Decision: lt.PolicyAsk, ExpiresInSeconds: 3600},
		{Tool: "deploy", When: `last(effects, e.tool == "run_tests").status == "failed"`, Decision: lt.PolicyAsk},
		{Tool: "*", When: `usage.cost_usd > 5.0 && tool != "run_tests"`, Decision: lt.PolicyAsk},
		{Tool: "", Decision: lt.PolicyAllow},
		{Name: "outside mail", Tool: "send_email", When: `!args.to.endsWith("@ourco.com")`, Decision: lt.PolicyAsk},
		{Tool: "shell", When: "has(args.command) &&\n  args.command.lowerAscii().contains('rm -rf')", Decision: lt.PolicyDeny},
		{Tool: "pay", When: `args.currency in ["USD", "EUR"] && args.memo.matches("^[a-z ]*$")`, Decision: lt.PolicyAllow},
	}
	s, err := policy.Compile(policies, agentTools)
	require.NoError(t, err)
	require.False(t, s.Empty())
	require.True(t, s.NeedsEffects())
}

func TestCompileStarAndEmptyToolWithoutTools(t *testing.T) {
	t.Parallel()
	_, err := policy.Compile([]lt.Policy{{Tool: "*", Decision: lt.PolicyAsk}, {Decision: lt.PolicyDeny, When: `tool == "x"`}}, nil)
	require.NoError(t, err)
}

func TestNeedsEffects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		when string
		want bool
	}{
		{`args.amount_usd > 10`, false},
		{`tool == "pay" && usage.tool_calls > 3.0`, false},
		{`size(effects) > 3`, true},
		{`count(effects, e.tool == "pay") > 1`, true},
		{`has(args.x) || last(effects, true).status == "failed"`, true},
		// An iteration variable that happens to be called effects is not
		// the history.
		{`[1, 2].exists(effects, effects > 1)`, false},
	}
	for _, tc := range tests {
		t.Run(tc.when, func(t *testing.T) {
			t.Parallel()
			s, err := policy.Compile([]lt.Policy{{Tool: "*", When: tc.when, Decision: lt.PolicyDeny}}, nil)
			require.NoError(t, err)
			require.Equal(t, tc.want, s.NeedsEffects())
		})
	}
}

func TestCompileRejects(t *testing.T) {
	t.Parallel()
	ok := lt.Policy{Tool: "pay", Decision: lt.PolicyAllow}
	tests := []struct {
		name     string
		policies []lt.Policy
		field    string
		message  string // a substring of the message
	}{
		{"missing decision", []lt.Policy{{Tool: "pay"}}, "policies[0].decision", "is required"},
		{"unknown decision", []lt.Policy{ok, {Decision: "block"}}, "policies[1].decision", `not "block"`},
		{"decision case matters", []lt.Policy{{Decision: "Deny"}}, "policies[0].decision", "must be allow, ask or deny"},
		{"unknown tool", []lt.Policy{ok, {Tool: "launch_missiles", Decision: lt.PolicyDeny}}, "policies[1].tool", `no tool "launch_missiles"`},
		{"tool pattern is not a glob", []lt.Policy{{Tool: "send_*", Decision: lt.PolicyDeny}}, "policies[0].tool", `no tool "send_*"`},
		{"duplicate name", []lt.Policy{{Name: "a", Decision: lt.PolicyAllow}, {Name: "b", Decision: lt.PolicyAsk}, {Name: "a", Decision: lt.PolicyDeny}}, "policies[2].name", `"a" is already the name of policies[0]`},
		{"name like a default", []lt.Policy{ok, {Name: "policies[0]", Decision: lt.PolicyDeny}}, "policies[1].name", "looks like a default name"},
		{"name with spaces around", []lt.Policy{{Name: " a", Decision: lt.PolicyDeny}}, "policies[0].name", "white space"},
		{"name with control character", []lt.Policy{{Name: "a\nb", Decision: lt.PolicyDeny}}, "policies[0].name", "printable"},
		{"name too long", []lt.Policy{{Name: strings.Repeat("n", 129), Decision: lt.PolicyDeny}}, "policies[0].name", "at most 128"},
		{"negative expiry", []lt.Policy{ok, ok, ok, {Decision: lt.PolicyAsk, ExpiresInSeconds: -1}}, "policies[3].expires_in_seconds", ">= 0"},
		{"expiry on deny", []lt.Policy{{Decision: lt.PolicyDeny, ExpiresInSeconds: 60}}, "policies[0].expires_in_seconds", "only to ask"},
		{"expiry on allow", []lt.Policy{{Decision: lt.PolicyAllow, ExpiresInSeconds: 60}}, "policies[0].expires_in_seconds", "only to ask"},
		{"expiry overflows", []lt.Policy{{Decision: lt.PolicyAsk, ExpiresInSeconds: 1 << 62}}, "policies[0].expires_in_seconds", "too large"},
		{"syntax error", []lt.Policy{ok, ok, {When: "args.amount_usd >", Decision: lt.PolicyDeny}}, "policies[2].when", "Syntax error"},
		{"unbalanced parenthesis", []lt.Policy{{When: "(args.x > 1", Decision: lt.PolicyDeny}}, "policies[0].when", "Syntax error"},
		{"undeclared reference", []lt.Policy{{When: "amount_usd > 10", Decision: lt.PolicyDeny}}, "policies[0].when", "column 1: undeclared reference to 'amount_usd'"},
		{"undeclared on second line", []lt.Policy{{When: "has(args.x) &&\n  amount > 1", Decision: lt.PolicyDeny}}, "policies[0].when", "line 2, column 3: undeclared reference to 'amount'"},
		{"unknown function", []lt.Policy{{When: "args.to.endsWithh('@x.com')", Decision: lt.PolicyDeny}}, "policies[0].when", "undeclared reference to 'endsWithh'"},
		{"int result", []lt.Policy{{When: "args.x + 1", Decision: lt.PolicyDeny}}, "policies[0].when", "must be a bool condition, but its type is int"},
		{"string result", []lt.Policy{{When: `"yes"`, Decision: lt.PolicyAsk}}, "policies[0].when", "its type is string"},
		{"count result", []lt.Policy{{When: `count(effects, e.tool == "pay")`, Decision: lt.PolicyAsk}}, "policies[0].when", "its type is int"},
		{"sum result", []lt.Policy{{When: `sum(effects, e.args.amount_usd)`, Decision: lt.PolicyAsk}}, "policies[0].when", "its type is double"},
		{"type error", []lt.Policy{{When: `size(effects) > "3"`, Decision: lt.PolicyAsk}}, "policies[0].when", "no matching overload"},
		{"count with one argument", []lt.Policy{{When: `count(effects) > 1`, Decision: lt.PolicyDeny}}, "policies[0].when", "count(list, predicate) takes 2 arguments, got 1"},
		{"sum with three arguments", []lt.Policy{{When: `sum(effects, e.args.a, 1) > 1.0`, Decision: lt.PolicyDeny}}, "policies[0].when", "sum(list, expression) takes 2 arguments, got 3"},
		{"last without arguments", []lt.Policy{{When: `last().status == "failed"`, Decision: lt.PolicyDeny}}, "policies[0].when", "last(list, predicate) takes 2 arguments, got 0"},
		{"element variable misspelt", []lt.Policy{{When: `count(effects, x.tool == "pay") > 1`, Decision: lt.PolicyDeny}}, "policies[0].when", "undeclared reference to 'x'"},
		{"invalid regular expression", []lt.Policy{{When: `args.s.matches("[")`, Decision: lt.PolicyDeny}}, "policies[0].when", "missing closing ]"},
		{"blank", []lt.Policy{{When: " \n\t", Decision: lt.PolicyDeny}}, "policies[0].when", "is blank"},
		{"too long", []lt.Policy{{When: strings.Repeat("true && ", 600) + "true", Decision: lt.PolicyDeny}}, "policies[0].when", "exceeds limit"},
		{"many errors are summarised", []lt.Policy{{When: "a || b || c || d || f", Decision: lt.PolicyDeny}}, "policies[0].when", "and 2 more"},
		{"approvers on deny", []lt.Policy{{Decision: lt.PolicyDeny, Approvers: &lt.Approvers{NotCreator: true}}}, "policies[0].approvers", "only to ask"},
		{"approvers empty", []lt.Policy{{Decision: lt.PolicyAsk, Approvers: &lt.Approvers{}}}, "policies[0].approvers", "give roles, names or not_creator"},
		{"approver role reader", []lt.Policy{ok, {Decision: lt.PolicyAsk, Approvers: &lt.Approvers{Roles: []lt.Role{lt.RoleApprover, lt.RoleReader}}}}, "policies[1].approvers.roles[1]", "the reader role may not decide actions"},
		{"approver role unknown", []lt.Policy{{Decision: lt.PolicyAsk, Approvers: &lt.Approvers{Roles: []lt.Role{"Admin"}}}}, "policies[0].approvers.roles[0]", `unknown role "Admin"`},
		{"approver name blank", []lt.Policy{{Decision: lt.PolicyAsk, Approvers: &lt.Approvers{Names: []string{""}}}}, "policies[0].approvers.names[0]", "not empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := policy.Compile(tc.policies, agentTools)
			require.Nil(t, s)
			var fe *policy.FieldError
			require.True(t, errors.As(err, &fe), "error %v is not a *FieldError", err)
			require.Equal(t, tc.field, fe.Field)
			require.Contains(t, fe.Message, tc.message)
			require.NotContains(t, fe.Message, "\n", "the message is one line")
			require.Equal(t, fe.Field+": "+fe.Message, err.Error())
		})
	}
}

func TestCompileRejectsFirstProblem(t *testing.T) {
	t.Parallel()
	// Problems are reported in policy order, so the first bad policy is
	// the one a user is told about.
	_, err := policy.Compile([]lt.Policy{
		{Decision: lt.PolicyAllow},
		{When: "nope", Decision: lt.PolicyDeny},
		{Decision: "maybe"},
	}, agentTools)
	var fe *policy.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "policies[1].when", fe.Field)
}

func TestVerdictFields(t *testing.T) {
	t.Parallel()
	s, err := policy.Compile([]lt.Policy{
		{Tool: "pay", When: `args.amount_usd > 10.0`, Decision: lt.PolicyAsk, ExpiresInSeconds: 90},
		{Name: "no-deploys", Tool: "deploy", Decision: lt.PolicyDeny, Reason: "deploys are frozen this week"},
		{Tool: "run_tests", Decision: lt.PolicyAllow},
	}, agentTools)
	require.NoError(t, err)

	v := s.Evaluate(&policy.Input{Tool: "pay", Arguments: []byte(`{"amount_usd":11}`)})
	require.Equal(t, policy.Verdict{
		Decision:  lt.PolicyAsk,
		Rule:      "policies[0]",
		Reason:    "approval required by policy policies[0] (when args.amount_usd > 10.0)",
		ExpiresIn: 90 * time.Second,
	}, v)

	v = s.Evaluate(&policy.Input{Tool: "deploy", Arguments: []byte(`{}`)})
	require.Equal(t, policy.Verdict{Decision: lt.PolicyDeny, Rule: "no-deploys", Reason: "deploys are frozen this week"}, v)

	v = s.Evaluate(&policy.Input{Tool: "run_tests"})
	require.Equal(t, policy.Verdict{Decision: lt.PolicyAllow, Rule: "policies[2]", Reason: "allowed by policy policies[2]"}, v)

	v = s.Evaluate(&policy.Input{Tool: "shell"})
	require.Equal(t, policy.Verdict{Decision: lt.PolicyAllow}, v)
}

func TestDecodeArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		want any
	}{
		{"empty", ``, map[string]any{}},
		{"null", `null`, map[string]any{}},
		{"object", `{"n":10,"f":10.5,"s":"x","b":true,"z":null,"l":[1,"a"],"o":{"k":2}}`, map[string]any{
			"n": 10.0, "f": 10.5, "s": "x", "b": true, "z": nil, "l": []any{1.0, "a"}, "o": map[string]any{"k": 2.0},
		}},
		{"array", `[1,2]`, []any{1.0, 2.0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := policy.DecodeArgs([]byte(tc.raw))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := policy.DecodeArgs([]byte(`{"a":`))
	require.ErrorContains(t, err, "decode arguments: ")
}

func TestGeneratedReasonIsShort(t *testing.T) {
	t.Parallel()
	when := "tool == \"pay\" ||\n " + strings.Repeat(`args.memo == "é" || `, 50) + "false"
	s, err := policy.Compile([]lt.Policy{{When: when, Decision: lt.PolicyDeny}}, agentTools)
	require.NoError(t, err)
	v := s.Evaluate(&policy.Input{Tool: "pay", Arguments: []byte(`{"memo":"x"}`)})
	require.Equal(t, lt.PolicyDeny, v.Decision)
	require.True(t, strings.HasPrefix(v.Reason, `denied by policy policies[0] (when tool == "pay" || args.memo == "é" ||`), v.Reason)
	require.True(t, strings.HasSuffix(v.Reason, "…)"), v.Reason)
	require.Less(t, len([]rune(v.Reason)), 250)
}

// TestVerdictCarriesApprovers: the ask policy that decides hands its
// approvers to the approval (a copy: the caller's spec cannot change them
// afterwards); an allow or a policy without them hands none.
func TestVerdictCarriesApprovers(t *testing.T) {
	t.Parallel()
	approvers := &lt.Approvers{Roles: []lt.Role{lt.RoleAdmin}, Names: []string{"carol"}, NotCreator: true}
	policies := []lt.Policy{
		{Name: "payments", Tool: "pay", Decision: lt.PolicyAsk, Approvers: approvers},
		{Name: "mail", Tool: "send_email", Decision: lt.PolicyAsk},
	}
	s, err := policy.Compile(policies, agentTools)
	require.NoError(t, err)
	approvers.Names[0] = "mallory"
	v := s.Evaluate(&policy.Input{Tool: "pay", Arguments: json.RawMessage(`{}`)})
	require.Equal(t, lt.PolicyAsk, v.Decision)
	require.Equal(t, &lt.Approvers{Roles: []lt.Role{lt.RoleAdmin}, Names: []string{"carol"}, NotCreator: true}, v.Approvers)
	require.Nil(t, s.Evaluate(&policy.Input{Tool: "send_email", Arguments: json.RawMessage(`{}`)}).Approvers)
	require.Nil(t, s.Evaluate(&policy.Input{Tool: "shell", Arguments: json.RawMessage(`{}`)}).Approvers)
}
