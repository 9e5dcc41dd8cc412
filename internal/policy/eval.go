package policy

import (
	"fmt"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Evaluate decides one call. It never panics and never returns an error: a
// condition that cannot be evaluated fails closed (an allow policy does not
// match; a deny or ask policy asks, with EvalError set).
func (s *Set) Evaluate(in *Input) Verdict {
	if s.Empty() {
		return Verdict{Decision: lt.PolicyAllow}
	}
	if in == nil {
		in = &Input{}
	}
	act := activation{in: in}
	best, bestRank, bestErr := -1, rankNone, ""
	for i := range s.rules {
		r := &s.rules[i]
		// Only a strictly more restrictive decision can win (ties go to
		// the first policy), so conditions that could not change the
		// verdict are never evaluated.
		if r.rank <= bestRank || !r.selects(in.Tool) {
			continue
		}
		rank, evalErr := r.match(&act)
		if rank > bestRank {
			best, bestRank, bestErr = i, rank, evalErr
			if bestRank == rankDeny {
				break
			}
		}
	}
	if best < 0 {
		return Verdict{Decision: lt.PolicyAllow}
	}
	return s.rules[best].verdict(bestRank, bestErr)
}

// match evaluates r's condition and returns the rank r decides with
// (rankNone when it does not match) and, when the condition failed, why.
func (r *rule) match(act *activation) (int, string) {
	if r.prog == nil {
		return r.rank, ""
	}
	out, _, err := r.prog.Eval(act)
	if err == nil {
		if b, ok := out.(types.Bool); ok {
			if b {
				return r.rank, ""
			}
			return rankNone, ""
		}
		err = fmt.Errorf("the condition is a %s, not a bool", out.Type().TypeName())
	}
	// Fail closed: a broken allow grants nothing, a broken deny or ask
	// hands the call to a person rather than guessing either way.
	if r.decision == lt.PolicyAllow {
		return rankNone, ""
	}
	msg := oneLine(err.Error())
	if msg == "" {
		msg = "unknown error"
	}
	return rankAsk, msg
}

func (r *rule) verdict(rank int, evalErr string) Verdict {
	v := Verdict{Rule: r.name, Reason: r.reason, EvalError: evalErr}
	switch rank {
	case rankDeny:
		v.Decision = lt.PolicyDeny
	case rankAsk:
		v.Decision = lt.PolicyAsk
		v.ExpiresIn, v.Approvers = r.expiresIn, r.approvers
	default:
		v.Decision = lt.PolicyAllow
	}
	if evalErr != "" {
		v.Reason = fmt.Sprintf("the condition of policy %s could not be evaluated (%s), so a person decides", r.name, evalErr)
		if r.reason != "" {
			v.Reason = r.reason + "; " + v.Reason
		}
		return v
	}
	if v.Reason == "" {
		v.Reason = r.generatedReason()
	}
	return v
}

func (r *rule) generatedReason() string {
	var b strings.Builder
	switch r.decision {
	case lt.PolicyDeny:
		b.WriteString("denied by policy ")
	case lt.PolicyAsk:
		b.WriteString("approval required by policy ")
	default:
		b.WriteString("allowed by policy ")
	}
	b.WriteString(r.name)
	if r.when != "" {
		b.WriteString(" (when ")
		b.WriteString(shorten(oneLine(r.when), maxReasonCondition))
		b.WriteString(")")
	}
	return b.String()
}

// activation is what one Evaluate shows its conditions. Each variable is
// built on first use and shared by every condition of the call: a call no
// condition inspects the history of never converts it.
type activation struct {
	in *Input

	args, effects, usage ref.Val
}

var _ interpreter.Activation = (*activation)(nil)

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varTool:
		return types.String(a.in.Tool), true
	case varArgs:
		if a.args == nil {
			a.args = argsValue(a.in)
		}
		return a.args, true
	case varEffects:
		if a.effects == nil {
			a.effects = effectsValue(a.in.Effects)
		}
		return a.effects, true
	case varUsage:
		if a.usage == nil {
			a.usage = usageValue(&a.in.Usage)
		}
		return a.usage, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation {
	return nil
}

// argsValue decodes the call's arguments. Arguments that are not JSON
// make every condition that reads them fail (and so fail closed) rather
// than look like an empty object.
func argsValue(in *Input) ref.Val {
	v, err := DecodeArgs(in.Arguments)
	if err != nil {
		return types.NewErr("arguments: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

func usageValue(u *lt.Usage) ref.Val {
	return types.DefaultTypeAdapter.NativeToValue(map[string]float64{
		keyInputTokens:  float64(u.InputTokens),
		keyOutputTokens: float64(u.OutputTokens),
		keyCostUSD:      u.CostUSD,
		keyModelCalls:   float64(u.ModelCalls),
		keyToolCalls:    float64(u.ToolCalls),
	})
}

// maxReasonCondition bounds how much of a condition a generated reason
// quotes: the reason goes to the model and to the person asked, and a
// condition may be thousands of characters long.
const maxReasonCondition = 200

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
