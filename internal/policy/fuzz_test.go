package policy_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/policy"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// FuzzCompile checks that no condition, however malformed, panics in
// Compile or Evaluate, that a rejected one is reported on its field, and
// that an accepted one always yields a valid verdict. The seed corpus is in
// testdata/fuzz/FuzzCompile.
func FuzzCompile(f *testing.F) {
	for _, when := range []string{
		`count(effects, e.tool == "send_email") >= 3`,
		`sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100`,
		`last(effects, e.tool == "run_tests").status == "failed"`,
		`!args.to.endsWith("@ourco.com")`,
		`args.amount_usd > 10`,
		`args.x + 1`,
		`count(effects)`,
	} {
		f.Add(when)
	}
	history := []policy.Effect{
		{Tool: "pay", Args: map[string]any{"amount_usd": 60.0, "to": "a@ourco.com"}, Class: lt.EffectIrreversible, Status: lt.EffectSucceeded, Step: 1},
		{Tool: "run_tests", Class: lt.EffectRead, Status: lt.EffectFailed, Error: "boom", Step: 2},
	}
	inputs := []*policy.Input{
		{Tool: "pay", Arguments: json.RawMessage(`{"amount_usd":12.5,"to":"b@else.example","items":[1,"a",{"k":null}]}`), Effects: history,
			Usage: lt.Usage{InputTokens: 10, CostUSD: 0.5}},
		{Tool: "pay", Arguments: json.RawMessage(`{}`)},
		{Tool: "pay", Arguments: json.RawMessage(`{"broken"`)},
	}
	f.Fuzz(func(t *testing.T, when string) {
		for _, decision := range []lt.PolicyDecision{lt.PolicyDeny, lt.PolicyAllow} {
			s, err := policy.Compile([]lt.Policy{{Tool: "*", When: when, Decision: decision}}, nil)
			if err != nil {
				var fe *policy.FieldError
				require.True(t, errors.As(err, &fe), "%v is not a *FieldError", err)
				require.Equal(t, "policies[0].when", fe.Field)
				require.NotEmpty(t, fe.Message)
				continue
			}
			for _, in := range inputs {
				v := s.Evaluate(in)
				switch v.Decision {
				case lt.PolicyAllow:
					require.Empty(t, v.EvalError)
				case lt.PolicyAsk:
					require.NotEmpty(t, v.EvalError, "only a failed condition turns deny into ask")
					require.Equal(t, lt.PolicyDeny, decision)
				case lt.PolicyDeny:
					require.Empty(t, v.EvalError)
					require.Equal(t, lt.PolicyDeny, decision)
				default:
					t.Fatalf("invalid decision %q", v.Decision)
				}
			}
		}
	})
}
