package policy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/policy"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// effect builds an Effect whose arguments are decoded the way the engine
// decodes them.
func effect(t testing.TB, tool, args string, status lt.EffectStatus) policy.Effect {
	t.Helper()
	a, err := policy.DecodeArgs(json.RawMessage(args))
	require.NoError(t, err)
	return policy.Effect{Tool: tool, Args: a, Class: lt.EffectIrreversible, Status: status, SessionID: "ses_1", TurnID: "turn_1", Step: 1}
}

func mustCompile(t testing.TB, policies ...lt.Policy) *policy.Set {
	t.Helper()
	s, err := policy.Compile(policies, agentTools)
	require.NoError(t, err)
	return s
}

func TestIssueExamples(t *testing.T) {
	t.Parallel()
	emails := func(n int) []policy.Effect {
		var out []policy.Effect
		for range n {
			out = append(out, effect(t, "send_email", `{"to":"a@ourco.com"}`, lt.EffectSucceeded))
			out = append(out, effect(t, "shell", `{"command":"ls"}`, lt.EffectSucceeded))
		}
		return out
	}
	payments := []policy.Effect{
		effect(t, "pay", `{"amount_usd":60}`, lt.EffectSucceeded),
		effect(t, "pay", `{"amount_usd":0.5}`, lt.EffectFailed),
		effect(t, "shell", `{"amount_usd":1000}`, lt.EffectSucceeded), // not a payment
	}
	tests := []struct {
		name    string
		policy  lt.Policy
		tool    string
		args    string
		effects []policy.Effect
		want    lt.PolicyDecision
	}{
		{"count below", lt.Policy{Tool: "send_email", When: `count(effects, e.tool == "send_email") >= 3`, Decision: lt.PolicyDeny},
			"send_email", `{"to":"b@ourco.com"}`, emails(2), lt.PolicyAllow},
		{"count reached", lt.Policy{Tool: "send_email", When: `count(effects, e.tool == "send_email") >= 3`, Decision: lt.PolicyDeny},
			"send_email", `{"to":"b@ourco.com"}`, emails(3), lt.PolicyDeny},
		{"count other tool", lt.Policy{Tool: "send_email", When: `count(effects, e.tool == "send_email") >= 3`, Decision: lt.PolicyDeny},
			"shell", `{"command":"ls"}`, emails(5), lt.PolicyAllow},

		{"sum under", lt.Policy{Tool: "pay", When: `sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100`, Decision: lt.PolicyAsk},
			"pay", `{"amount_usd":39}`, payments, lt.PolicyAllow}, // 60 + 0.5 + 39 = 99.5
		{"sum over with integer", lt.Policy{Tool: "pay", When: `sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100`, Decision: lt.PolicyAsk},
			"pay", `{"amount_usd":40}`, payments, lt.PolicyAsk}, // 100.5
		{"sum over with fraction", lt.Policy{Tool: "pay", When: `sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100`, Decision: lt.PolicyAsk},
			"pay", `{"amount_usd":39.6}`, payments, lt.PolicyAsk}, // 100.1
		{"sum no history", lt.Policy{Tool: "pay", When: `sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100`, Decision: lt.PolicyAsk},
			"pay", `{"amount_usd":100}`, nil, lt.PolicyAllow},

		{"last test failed", lt.Policy{Tool: "deploy", When: `last(effects, e.tool == "run_tests").status == "failed"`, Decision: lt.PolicyAsk},
			"deploy", `{}`, []policy.Effect{
				effect(t, "run_tests", `{}`, lt.EffectSucceeded),
				effect(t, "run_tests", `{}`, lt.EffectFailed),
				effect(t, "shell", `{}`, lt.EffectSucceeded),
			}, lt.PolicyAsk},
		{"last test passed", lt.Policy{Tool: "deploy", When: `last(effects, e.tool == "run_tests").status == "failed"`, Decision: lt.PolicyAsk},
			"deploy", `{}`, []policy.Effect{
				effect(t, "run_tests", `{}`, lt.EffectFailed),
				effect(t, "run_tests", `{}`, lt.EffectSucceeded),
				effect(t, "shell", `{}`, lt.EffectFailed),
			}, lt.PolicyAllow},
		{"no test ran", lt.Policy{Tool: "deploy", When: `last(effects, e.tool == "run_tests").status == "failed"`, Decision: lt.PolicyAsk},
			"deploy", `{}`, []policy.Effect{effect(t, "shell", `{}`, lt.EffectFailed)}, lt.PolicyAllow},

		{"amount 10", lt.Policy{Tool: "pay", When: `args.amount_usd > 10`, Decision: lt.PolicyAsk}, "pay", `{"amount_usd":10}`, nil, lt.PolicyAllow},
		{"amount 10.0", lt.Policy{Tool: "pay", When: `args.amount_usd > 10`, Decision: lt.PolicyAsk}, "pay", `{"amount_usd":10.0}`, nil, lt.PolicyAllow},
		{"amount 10.5", lt.Policy{Tool: "pay", When: `args.amount_usd > 10`, Decision: lt.PolicyAsk}, "pay", `{"amount_usd":10.5}`, nil, lt.PolicyAsk},
		{"amount 11", lt.Policy{Tool: "pay", When: `args.amount_usd > 10`, Decision: lt.PolicyAsk}, "pay", `{"amount_usd":11}`, nil, lt.PolicyAsk},
		{"amount 1e2", lt.Policy{Tool: "pay", When: `args.amount_usd > 10`, Decision: lt.PolicyAsk}, "pay", `{"amount_usd":1e2}`, nil, lt.PolicyAsk},
		{"amount equal int literal", lt.Policy{Tool: "pay", When: `args.amount_usd == 10`, Decision: lt.PolicyAsk}, "pay", `{"amount_usd":10}`, nil, lt.PolicyAsk},

		{"inside mail", lt.Policy{Tool: "send_email", When: `!args.to.endsWith("@ourco.com")`, Decision: lt.PolicyAsk},
			"send_email", `{"to":"bob@ourco.com"}`, nil, lt.PolicyAllow},
		{"outside mail", lt.Policy{Tool: "send_email", When: `!args.to.endsWith("@ourco.com")`, Decision: lt.PolicyAsk},
			"send_email", `{"to":"bob@ourco.com.evil.example"}`, nil, lt.PolicyAsk},
		{"string extensions", lt.Policy{Tool: "shell", When: `args.command.lowerAscii().contains("rm -rf") || args.command.split(" ").size() > 20`, Decision: lt.PolicyDeny},
			"shell", `{"command":"RM -RF /"}`, nil, lt.PolicyDeny},
		{"method of the API example", lt.Policy{Tool: "shell", When: `args.method != 'GET'`, Decision: lt.PolicyAsk},
			"shell", `{"method":"GET"}`, nil, lt.PolicyAllow},
		{"has guard without the key", lt.Policy{Tool: "pay", When: `has(args.amount_usd) && args.amount_usd > 10`, Decision: lt.PolicyDeny},
			"pay", `{}`, nil, lt.PolicyAllow},
		{"has guard with the key", lt.Policy{Tool: "pay", When: `has(args.amount_usd) && args.amount_usd > 10`, Decision: lt.PolicyDeny},
			"pay", `{"amount_usd":12}`, nil, lt.PolicyDeny},
		{"tool variable", lt.Policy{Tool: "*", When: `tool.startsWith("run_")`, Decision: lt.PolicyDeny},
			"run_tests", `{}`, nil, lt.PolicyDeny},
		{"nested arguments", lt.Policy{Tool: "send_email", When: `args.cc.exists(a, !a.endsWith("@ourco.com"))`, Decision: lt.PolicyAsk},
			"send_email", `{"cc":["a@ourco.com","b@else.example"]}`, nil, lt.PolicyAsk},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.policy)
			v := s.Evaluate(&policy.Input{Tool: tc.tool, Arguments: json.RawMessage(tc.args), Effects: tc.effects})
			require.Empty(t, v.EvalError)
			require.Equal(t, tc.want, v.Decision)
			if tc.want == lt.PolicyAllow {
				require.Empty(t, v.Rule)
			} else {
				require.Equal(t, "policies[0]", v.Rule)
				require.Contains(t, v.Reason, tc.policy.When)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	allow := lt.Policy{Name: "allow", Tool: "pay", Decision: lt.PolicyAllow}
	ask := lt.Policy{Name: "ask", Tool: "*", Decision: lt.PolicyAsk}
	ask2 := lt.Policy{Name: "ask2", Decision: lt.PolicyAsk}
	deny := lt.Policy{Name: "deny", Tool: "pay", When: "args.amount_usd > 100.0", Decision: lt.PolicyDeny}
	deny2 := lt.Policy{Name: "deny2", Decision: lt.PolicyDeny}
	askOther := lt.Policy{Name: "ask-other", Tool: "deploy", Decision: lt.PolicyAsk}
	tests := []struct {
		name     string
		policies []lt.Policy
		args     string
		wantRule string
		want     lt.PolicyDecision
	}{
		{"deny over ask and allow", []lt.Policy{allow, ask, deny}, `{"amount_usd":101}`, "deny", lt.PolicyDeny},
		{"ask over allow when deny does not match", []lt.Policy{allow, ask, deny}, `{"amount_usd":5}`, "ask", lt.PolicyAsk},
		{"allow alone", []lt.Policy{askOther, allow}, `{}`, "allow", lt.PolicyAllow},
		{"other tool does not match", []lt.Policy{askOther}, `{}`, "", lt.PolicyAllow},
		{"ties go to the first ask", []lt.Policy{ask2, ask}, `{}`, "ask2", lt.PolicyAsk},
		{"ties go to the first deny", []lt.Policy{deny2, deny}, `{"amount_usd":101}`, "deny2", lt.PolicyDeny},
		{"later deny beats earlier ask", []lt.Policy{ask, ask2, deny2}, `{}`, "deny2", lt.PolicyDeny},
		{"empty tool matches", []lt.Policy{ask2}, `{}`, "ask2", lt.PolicyAsk},
		{"star matches", []lt.Policy{ask}, `{}`, "ask", lt.PolicyAsk},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.policies...)
			v := s.Evaluate(&policy.Input{Tool: "pay", Arguments: json.RawMessage(tc.args)})
			require.Equal(t, tc.want, v.Decision)
			require.Equal(t, tc.wantRule, v.Rule)
		})
	}
}

func TestFailClosed(t *testing.T) {
	t.Parallel()
	var many []policy.Effect
	for range 200 {
		many = append(many, effect(t, "shell", `{}`, lt.EffectSucceeded))
	}
	tests := []struct {
		name     string
		policies []lt.Policy
		args     string
		effects  []policy.Effect
		want     policy.Verdict // EvalError and Reason are checked by substring
		evalErr  string
	}{
		{
			name:     "missing key on deny asks",
			policies: []lt.Policy{{Tool: "pay", When: "args.amount_usd > 10", Decision: lt.PolicyDeny}},
			args:     `{}`,
			want:     policy.Verdict{Decision: lt.PolicyAsk, Rule: "policies[0]"},
			evalErr:  "no such key: amount_usd",
		},
		{
			name:     "missing key on ask asks and keeps its expiry",
			policies: []lt.Policy{{Name: "big", Tool: "pay", When: "args.amount_usd > 10", Decision: lt.PolicyAsk, ExpiresInSeconds: 60}},
			args:     `{"amount":3}`,
			want:     policy.Verdict{Decision: lt.PolicyAsk, Rule: "big", ExpiresIn: time.Minute},
			evalErr:  "no such key: amount_usd",
		},
		{
			name:     "missing key on allow does not match",
			policies: []lt.Policy{{Tool: "pay", When: "args.amount_usd < 10", Decision: lt.PolicyAllow}},
			args:     `{}`,
			want:     policy.Verdict{Decision: lt.PolicyAllow},
		},
		{
			name: "broken allow leaves the ask in force",
			policies: []lt.Policy{
				{Tool: "pay", Decision: lt.PolicyAsk},
				{Tool: "pay", When: "args.amount_usd < 10", Decision: lt.PolicyAllow},
			},
			args: `{}`,
			want: policy.Verdict{Decision: lt.PolicyAsk, Rule: "policies[0]", Reason: "approval required by policy policies[0]"},
		},
		{
			name:     "non-bool result",
			policies: []lt.Policy{{Tool: "pay", When: "args.flag", Decision: lt.PolicyDeny}},
			args:     `{"flag":"yes"}`,
			want:     policy.Verdict{Decision: lt.PolicyAsk, Rule: "policies[0]"},
			evalErr:  "the condition is a string, not a bool",
		},
		{
			name:     "bool argument is fine",
			policies: []lt.Policy{{Tool: "pay", When: "args.flag", Decision: lt.PolicyDeny}},
			args:     `{"flag":true}`,
			want:     policy.Verdict{Decision: lt.PolicyDeny, Rule: "policies[0]", Reason: "denied by policy policies[0] (when args.flag)"},
		},
		{
			name:     "last without a match is not bool",
			policies: []lt.Policy{{Tool: "pay", When: `last(effects, e.tool == "x")`, Decision: lt.PolicyDeny}},
			args:     `{}`,
			want:     policy.Verdict{Decision: lt.PolicyAsk, Rule: "policies[0]"},
			evalErr:  "the condition is a map, not a bool",
		},
		{
			name:     "sum of a string",
			policies: []lt.Policy{{Tool: "pay", When: `sum(effects, e.tool) > 1.0`, Decision: lt.PolicyDeny}},
			args:     `{}`,
			effects:  many[:1],
			want:     policy.Verdict{Decision: lt.PolicyAsk, Rule: "policies[0]"},
			evalErr:  "sum: value is a string, not a number",
		},
		{
			name:     "cost limit",
			policies: []lt.Policy{{Tool: "pay", When: `effects.all(a, effects.all(b, effects.all(c, a.step == c.step)))`, Decision: lt.PolicyDeny}},
			args:     `{}`,
			effects:  many,
			want:     policy.Verdict{Decision: lt.PolicyAsk, Rule: "policies[0]"},
			evalErr:  "cost limit exceeded",
		},
		{
			name:     "arguments that are not JSON",
			policies: []lt.Policy{{Tool: "pay", When: `args.amount_usd > 1`, Decision: lt.PolicyDeny}},
			args:     `{"amount_usd":`,
			want:     policy.Verdict{Decision: lt.PolicyAsk, Rule: "policies[0]"},
			evalErr:  "arguments: decode arguments",
		},
		{
			name: "arguments that are not JSON do not matter to conditions that ignore them",
			policies: []lt.Policy{
				{Tool: "pay", When: `tool == "pay"`, Decision: lt.PolicyDeny},
			},
			args: `{"amount_usd":`,
			want: policy.Verdict{Decision: lt.PolicyDeny, Rule: "policies[0]", Reason: `denied by policy policies[0] (when tool == "pay")`},
		},
		{
			name: "a broken deny does not hide a working one",
			policies: []lt.Policy{
				{Tool: "pay", When: "args.nope > 1", Decision: lt.PolicyDeny},
				{Tool: "pay", When: "args.amount_usd > 1", Decision: lt.PolicyDeny},
			},
			args: `{"amount_usd":2}`,
			want: policy.Verdict{Decision: lt.PolicyDeny, Rule: "policies[1]", Reason: "denied by policy policies[1] (when args.amount_usd > 1)"},
		},
		{
			name: "an earlier ask wins the tie with a broken deny",
			policies: []lt.Policy{
				{Name: "first", Tool: "pay", Decision: lt.PolicyAsk, Reason: "payments need a person"},
				{Tool: "pay", When: "args.nope > 1", Decision: lt.PolicyDeny},
			},
			args: `{}`,
			want: policy.Verdict{Decision: lt.PolicyAsk, Rule: "first", Reason: "payments need a person"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.policies...)
			got := s.Evaluate(&policy.Input{Tool: "pay", Arguments: json.RawMessage(tc.args), Effects: tc.effects})
			if tc.evalErr == "" {
				require.Equal(t, tc.want, got)
				return
			}
			require.Contains(t, got.EvalError, tc.evalErr)
			require.Contains(t, got.Reason, "could not be evaluated")
			require.Contains(t, got.Reason, got.EvalError)
			require.Contains(t, got.Reason, tc.want.Rule)
			got.EvalError, got.Reason = "", ""
			require.Equal(t, tc.want, got)
		})
	}
}

func TestFailClosedKeepsPolicyReason(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, lt.Policy{Tool: "pay", When: "args.amount_usd > 10", Decision: lt.PolicyDeny, Reason: "large payments are not allowed"})
	v := s.Evaluate(&policy.Input{Tool: "pay", Arguments: json.RawMessage(`{}`)})
	require.Equal(t, lt.PolicyAsk, v.Decision)
	require.True(t, strings.HasPrefix(v.Reason, "large payments are not allowed; the condition of policy policies[0] could not be evaluated (no such key: amount_usd)"), v.Reason)
}

func TestMacros(t *testing.T) {
	t.Parallel()
	history := []policy.Effect{
		{Tool: "run_tests", Args: map[string]any{"suite": "unit"}, Class: lt.EffectRead, Status: lt.EffectFailed, Error: "2 failed", SessionID: "ses_a", TurnID: "turn_1", Step: 1},
		{Tool: "pay", Args: map[string]any{"amount_usd": 2.5}, Class: lt.EffectIrreversible, Status: lt.EffectSucceeded, SessionID: "ses_a", TurnID: "turn_1", Step: 2},
		{Tool: "pay", Args: map[string]any{"amount_usd": 3.0}, Class: lt.EffectIrreversible, Status: lt.EffectInDoubt, SessionID: "ses_b", TurnID: "turn_2", Step: 3},
		{Tool: "shell", Class: lt.EffectIdempotent, Status: lt.EffectStarted, SessionID: "ses_a", TurnID: "turn_2", Step: 4}, // no Args
	}
	conditions := []string{
		// count
		`count(effects, e.tool == "pay") == 2`,
		`count(effects, true) == 4`,
		`count(effects, e.status == "in_doubt" || e.status == "started") == 2`,
		`count(effects.filter(x, x.session_id == "ses_a"), e.class == "irreversible") == 1`,
		`count([1, 2, 3], e > 1) == 2`,
		`count(args.items, e.startsWith("a")) == 1`,
		// sum
		`sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) == 5.5`,
		`sum(effects, e.step) == 10.0`,
		`sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) > 5`,
		`sum([1, 2u, 0.5], e) == 3.5`,
		`sum(effects, has(e.args.amount_usd) ? e.args.amount_usd : 0.0) == 5.5`,
		// last
		`last(effects, e.tool == "run_tests").status == "failed"`,
		`last(effects, e.tool == "run_tests").error == "2 failed"`,
		`last(effects, e.tool == "run_tests").args.suite == "unit"`,
		`last(effects, e.tool == "pay").args.amount_usd == 3.0`,
		`last(effects, e.tool == "pay").session_id == "ses_b"`,
		`last(effects, true).step == 4`,
		`last(effects, true).turn_id == "turn_2"`,
		`!has(last(effects, true).args.anything)`,
		`last(effects, e.tool == "nope").tool == ""`,
		`last([1, 5, 3], e > 2) == 3`,
		// nesting shadows e
		`count(effects, count(effects, e.step < 3) == 2) == 4`,
		// effects as values
		`effects[0].tool == "run_tests" && effects[3].step == 4`,
		`"tool" in effects[0] && !("nope" in effects[0]) && size(effects[0]) == 8`,
		`effects[1] == effects[1] && effects[1] != effects[2]`,
		`effects.map(x, x.tool) == ["run_tests", "pay", "pay", "shell"]`,
		`effects[0].args == {"suite": "unit"}`,
		`effects.exists(x, x.tool == "shell" && x.args == {})`,
		`[effects[1]].map(x, x.args.amount_usd) == [2.5]`,
		`type(effects[0]) == map`,
		// usage
		`usage.cost_usd > 1.0 && usage.input_tokens == 1000 && usage.output_tokens == 20`,
		`usage.model_calls + usage.tool_calls == 7.0`,
	}
	in := &policy.Input{
		Tool:      "pay",
		Arguments: json.RawMessage(`{"amount_usd":1,"items":["abc","bcd"]}`),
		Effects:   history,
		Usage:     lt.Usage{InputTokens: 1000, OutputTokens: 20, CostUSD: 1.25, ModelCalls: 3, ToolCalls: 4},
	}
	for _, when := range conditions {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, lt.Policy{When: when, Decision: lt.PolicyDeny})
			v := s.Evaluate(in)
			require.Empty(t, v.EvalError)
			require.Equal(t, lt.PolicyDeny, v.Decision, "%s is not true", when)
		})
	}
}

func TestMacrosOnEmptyLists(t *testing.T) {
	t.Parallel()
	conditions := []string{
		`count(effects, e.tool == "send_email") == 0`,
		`count(effects, true) == 0`,
		`sum(effects, e.args.amount_usd) == 0.0`,
		`sum([], e) == 0.0`,
		`sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd == 7.0`,
		`last(effects, e.tool == "run_tests").status == ""`,
		`last(effects, true) == {"tool": "", "args": {}, "class": "", "status": "", "error": "", "session_id": "", "turn_id": "", "step": 0}`,
		`size(last(effects, true).args) == 0`,
		`!has(last(effects, true).args.amount_usd)`,
		`last([], true).tool == ""`,
		`!(last(effects, e.tool == "run_tests").status == "failed")`,
	}
	for _, effects := range [][]policy.Effect{nil, {}} {
		for _, when := range conditions {
			t.Run(fmt.Sprintf("%s/%v", when, effects == nil), func(t *testing.T) {
				t.Parallel()
				s := mustCompile(t, lt.Policy{When: when, Decision: lt.PolicyDeny})
				v := s.Evaluate(&policy.Input{Tool: "pay", Arguments: json.RawMessage(`{"amount_usd":7}`), Effects: effects})
				require.Empty(t, v.EvalError)
				require.Equal(t, lt.PolicyDeny, v.Decision, "%s is not true", when)
			})
		}
	}
}

func TestEvaluateNilInput(t *testing.T) {
	t.Parallel()
	s := mustCompile(t,
		lt.Policy{Tool: "pay", Decision: lt.PolicyDeny},
		lt.Policy{When: `tool == "" && size(args) == 0 && size(effects) == 0 && usage.cost_usd == 0.0`, Decision: lt.PolicyAsk})
	v := s.Evaluate(nil)
	require.Equal(t, lt.PolicyAsk, v.Decision)
	require.Equal(t, "policies[1]", v.Rule)
	require.Empty(t, v.EvalError)
}

func TestEvaluateConcurrently(t *testing.T) {
	t.Parallel()
	s := mustCompile(t,
		lt.Policy{Tool: "send_email", When: `count(effects, e.tool == "send_email") >= 3`, Decision: lt.PolicyDeny},
		lt.Policy{Tool: "pay", When: `args.amount_usd > 10`, Decision: lt.PolicyAsk})
	history := []policy.Effect{
		effect(t, "send_email", `{}`, lt.EffectSucceeded),
		effect(t, "send_email", `{}`, lt.EffectSucceeded),
		effect(t, "send_email", `{}`, lt.EffectSucceeded),
	}
	var wg sync.WaitGroup
	results := make([]lt.PolicyDecision, 16)
	for i := range results {
		wg.Go(func() {
			var v policy.Verdict
			for range 20 {
				if i%2 == 0 {
					v = s.Evaluate(&policy.Input{Tool: "send_email", Arguments: json.RawMessage(`{}`), Effects: history})
				} else {
					v = s.Evaluate(&policy.Input{Tool: "pay", Arguments: json.RawMessage(`{"amount_usd":11}`)})
				}
			}
			results[i] = v.Decision
		})
	}
	wg.Wait()
	for i, d := range results {
		if i%2 == 0 {
			require.Equal(t, lt.PolicyDeny, d)
		} else {
			require.Equal(t, lt.PolicyAsk, d)
		}
	}
}

// benchHistory is a session of n effects, every fifth one an e-mail.
func benchHistory(b *testing.B, n int) []policy.Effect {
	out := make([]policy.Effect, n)
	for i := range out {
		tool, args := "shell", `{"command":"ls -la","timeout_seconds":30}`
		if i%5 == 0 {
			tool, args = "send_email", `{"to":"a@ourco.com","subject":"hi"}`
		}
		out[i] = effect(b, tool, args, lt.EffectSucceeded)
		out[i].Step = i
	}
	return out
}

func BenchmarkEvaluate(b *testing.B) {
	s := mustCompile(b,
		lt.Policy{Name: "no-spam", Tool: "send_email", When: `count(effects, e.tool == "send_email") >= 300`, Decision: lt.PolicyDeny},
		lt.Policy{Tool: "send_email", When: `!args.to.endsWith("@ourco.com")`, Decision: lt.PolicyAsk},
	)
	in := &policy.Input{
		Tool:      "send_email",
		Arguments: json.RawMessage(`{"to":"b@ourco.com","subject":"report"}`),
		Effects:   benchHistory(b, 1000),
	}
	b.ReportAllocs()
	for b.Loop() {
		if v := s.Evaluate(in); v.Decision != lt.PolicyAllow {
			b.Fatalf("verdict %+v", v)
		}
	}
}

// BenchmarkEvaluateArgsOnly shows that a call whose conditions never read
// the history does not pay for it.
func BenchmarkEvaluateArgsOnly(b *testing.B) {
	s := mustCompile(b, lt.Policy{Tool: "pay", When: `has(args.amount_usd) && args.amount_usd > 10`, Decision: lt.PolicyAsk})
	in := &policy.Input{Tool: "pay", Arguments: json.RawMessage(`{"amount_usd":5}`), Effects: benchHistory(b, 1000)}
	b.ReportAllocs()
	for b.Loop() {
		if v := s.Evaluate(in); v.Decision != lt.PolicyAllow {
			b.Fatalf("verdict %+v", v)
		}
	}
}
