package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// warnFraction is the share of a hard limit at which budget.warning is given.
const warnFraction = 0.8

// budgetDim is one dimension of a budget with the usage against it: used
// against the hard limit, softUsed against the soft threshold (they differ
// by what running children may spend: their hard shares against the one,
// their soft shares against the other).
type budgetDim struct {
	name                      string
	soft, max, used, softUsed float64
}

// budgetDims lists the dimensions checked at a point of the loop: before a
// model call every one but tool calls; before a tool call, tool calls and
// wall time (the other dimensions only grow with model calls).
func (r *runner) budgetDims(beforeTool bool) []budgetDim {
	b, u, su := r.st.Session.Budget, budgetUsage(r.st), softBudgetUsage(r.st)
	wallUsed := r.st.WallElapsed(r.e.clock.Now()).Seconds()
	wall := budgetDim{"wall_seconds", float64(b.SoftWallSeconds), float64(b.MaxWallSeconds), wallUsed, wallUsed}
	if beforeTool {
		return []budgetDim{
			{"tool_calls", float64(b.SoftToolCalls), float64(b.MaxToolCalls), float64(u.ToolCalls), float64(su.ToolCalls)},
			wall,
		}
	}
	return []budgetDim{
		{"cost_usd", b.SoftCostUSD, b.MaxCostUSD, u.CostUSD, su.CostUSD},
		{"tokens", float64(b.SoftTokens), float64(b.MaxTokens), float64(u.InputTokens + u.OutputTokens), float64(su.InputTokens + su.OutputTokens)},
		{"model_calls", float64(b.SoftModelCalls), float64(b.MaxModelCalls), float64(u.ModelCalls), float64(su.ModelCalls)},
		wall,
	}
}

// checkBudget enforces the budget before a step or a tool call (DESIGN.md
// principle 6): a hard limit reached ends the turn (budget_exceeded); a soft
// threshold reached raises a budget action and the session waits for it;
// 80 % of a hard limit gives one budget.warning. It reports whether the
// loop may go on.
func (r *runner) checkBudget(beforeTool bool) (bool, error) {
	dims := r.budgetDims(beforeTool)
	for _, d := range dims {
		if d.max > 0 && d.used >= d.max {
			return false, r.exceed(d)
		}
	}
	for _, d := range dims {
		if d.soft > 0 && d.softUsed >= d.soft {
			return false, r.askBudget(d)
		}
	}
	for _, d := range dims {
		if d.max > 0 && d.used >= warnFraction*d.max && r.st.BudgetWarned[d.name] != d.max {
			turn := r.st.CurrentTurn()
			if err := r.add(lt.EventBudgetWarning, turn.ID, 0, lt.BudgetWarningData{
				Limit: lt.BudgetLimit{Name: d.name, Soft: d.soft, Max: d.max, Used: d.used},
			}); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

func (r *runner) exceed(d budgetDim) error {
	turn := r.st.CurrentTurn()
	if err := r.add(lt.EventBudgetExceeded, turn.ID, 0, lt.BudgetExceededData{Limit: d.name, Max: d.max, Used: d.used}); err != nil {
		return err
	}
	return r.failTurn(lt.StopBudgetExceeded, fmt.Sprintf("budget limit max_%s reached (%g of %g)", d.name, d.used, d.max))
}

// askBudget raises a budget action for a soft threshold: a person approves
// new limits or stops the turn.
func (r *runner) askBudget(d budgetDim) error {
	turn := r.st.CurrentTurn()
	step := 0
	if r.st.Step != nil {
		step = r.st.Step.N
	}
	sid := r.st.Session.ID
	u := r.st.Session.Usage
	a := lt.Action{
		ID: derivedID("act_", sid, turn.ID, step, "budget", d.name, d.soft, u.ModelCalls, u.ToolCalls), SessionID: sid,
		Type: lt.ActionBudget, Status: lt.ActionPending, TurnID: turn.ID,
		Summary: fmt.Sprintf("The session reached its soft limit on %s (%s of %s): approve spending past it, or stop the turn",
			dimLabel(d.name), dimValue(d.name, d.softUsed), dimValue(d.name, d.soft)),
		Consequence: consequenceOfBudget(d),
		Limit:       &lt.BudgetLimit{Name: d.name, Soft: d.soft, Max: d.max, Used: d.softUsed},
		Usage:       &u,
		CreatedAt:   r.e.clock.Now(),
	}
	return r.add(lt.EventActionRequired, turn.ID, 0, lt.ActionRequiredData{Action: a})
}

func consequenceOfBudget(d budgetDim) string {
	if d.max > 0 {
		return fmt.Sprintf("approving lets the session go on up to its hard limit of %s (or new limits you give)", dimValue(d.name, d.max))
	}
	return "approving lets the session go on with no limit on " + dimLabel(d.name) + " unless you give one"
}

func dimLabel(name string) string {
	switch name {
	case "cost_usd":
		return "cost"
	case "wall_seconds":
		return "wall-clock time"
	default:
		return map[string]string{"tokens": "tokens", "model_calls": "model calls", "tool_calls": "tool calls"}[name]
	}
}

func dimValue(name string, v float64) string {
	switch name {
	case "cost_usd":
		return fmt.Sprintf("$%.4g", v)
	case "wall_seconds":
		return fmt.Sprintf("%.0f s", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// budgetUsage is what a check of the hard limits counts as used: the
// session's usage, and what its running sub-agents may still spend (set
// aside: the tree as a whole stays within the budget).
func budgetUsage(st *journal.State) lt.Usage {
	return withReserved(st.Session.Usage, st.Reserved())
}

// softBudgetUsage is what a check of the soft thresholds counts as used:
// the session's usage, and what its running sub-agents may spend before
// one of them asks a person (journal.State.ReservedSoft).
func softBudgetUsage(st *journal.State) lt.Usage {
	return withReserved(st.Session.Usage, st.ReservedSoft())
}

func withReserved(u, res lt.Usage) lt.Usage {
	u.CostUSD += res.CostUSD
	u.InputTokens += res.InputTokens
	u.ModelCalls += res.ModelCalls
	u.ToolCalls += res.ToolCalls
	return u
}

// usedOf returns the session's current usage on a budget dimension, as its
// soft thresholds' check counts it (softBudgetUsage): a threshold a person
// approved past is cleared by it.
func usedOf(st *journal.State, name string, now time.Time) float64 {
	u := softBudgetUsage(st)
	switch name {
	case "cost_usd":
		return u.CostUSD
	case "tokens":
		return float64(u.InputTokens + u.OutputTokens)
	case "model_calls":
		return float64(u.ModelCalls)
	case "tool_calls":
		return float64(u.ToolCalls)
	case "wall_seconds":
		return st.WallElapsed(now).Seconds()
	}
	return 0
}

// softOf returns the soft threshold of a budget dimension.
func softOf(b *lt.Budget, name string) float64 {
	switch name {
	case "cost_usd":
		return b.SoftCostUSD
	case "tokens":
		return float64(b.SoftTokens)
	case "model_calls":
		return float64(b.SoftModelCalls)
	case "tool_calls":
		return float64(b.SoftToolCalls)
	case "wall_seconds":
		return float64(b.SoftWallSeconds)
	}
	return 0
}

// clearSoft removes the soft threshold of a dimension: a person approved
// going past it.
func clearSoft(b *lt.Budget, name string) {
	switch name {
	case "cost_usd":
		b.SoftCostUSD = 0
	case "tokens":
		b.SoftTokens = 0
	case "model_calls":
		b.SoftModelCalls = 0
	case "tool_calls":
		b.SoftToolCalls = 0
	case "wall_seconds":
		b.SoftWallSeconds = 0
	}
}

// mergeBudget returns cur with the non-zero limits of given replacing its own.
func mergeBudget(cur lt.Budget, given *lt.Budget) lt.Budget {
	if given == nil {
		return cur
	}
	pick := func(dst *float64, v float64) {
		if v != 0 {
			*dst = v
		}
	}
	picki := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	pick(&cur.MaxCostUSD, given.MaxCostUSD)
	pick(&cur.SoftCostUSD, given.SoftCostUSD)
	picki(&cur.MaxTokens, given.MaxTokens)
	picki(&cur.SoftTokens, given.SoftTokens)
	picki(&cur.MaxModelCalls, given.MaxModelCalls)
	picki(&cur.SoftModelCalls, given.SoftModelCalls)
	picki(&cur.MaxToolCalls, given.MaxToolCalls)
	picki(&cur.SoftToolCalls, given.SoftToolCalls)
	picki(&cur.MaxWallSeconds, given.MaxWallSeconds)
	picki(&cur.SoftWallSeconds, given.SoftWallSeconds)
	return cur
}

// UpdateBudget applies PATCH /v1/sessions/{id}/budget. A pending budget
// action whose soft threshold the new budget moves past the usage (or
// removes) is resolved as approved in the same append. A session stopped by
// its budget is not restarted: its next turn runs under the new limits.
func (e *Engine) UpdateBudget(ctx context.Context, sessionID string, p *lt.BudgetPatch) (*lt.Session, error) {
	if p == nil {
		return nil, apierror.Invalid("", "request body is empty: send the limits to change")
	}
	v, err := mutate(ctx, e, sessionID, func(b *batch) (*lt.Session, error) {
		nb := p.Apply(b.st.Session.Budget)
		if err := validateBudget(nb, ""); err != nil {
			return nil, err
		}
		if nb != b.st.Session.Budget {
			if err := b.add(lt.EventBudgetUpdated, "", 0, lt.BudgetUpdatedData{Budget: nb, Actor: b.actor()}); err != nil {
				return nil, err
			}
		}
		for _, a := range append([]lt.Action(nil), b.st.Pending...) {
			if a.Type != lt.ActionBudget || a.Limit == nil {
				continue
			}
			if soft := softOf(&nb, a.Limit.Name); soft > 0 && soft <= usedOf(b.st, a.Limit.Name, e.clock.Now()) {
				continue // still at the threshold: the action stays
			}
			d := lt.Decision{Decision: lt.DecisionApprove, Reason: "the budget was updated"}
			sum, err := decisionSHA256(&d)
			if err != nil {
				return nil, err
			}
			if err := b.add(lt.EventActionResolved, a.TurnID, 0, lt.ActionResolvedData{
				ActionID: a.ID, Type: string(a.Type), Decision: d, DecisionSHA256: sum, Budget: &nb, Actor: b.actor(),
			}); err != nil {
				return nil, err
			}
		}
		if len(b.st.Pending) == 0 && b.st.Session.Status == lt.SessionRequiresAction {
			if err := b.status(lt.SessionRunning, ""); err != nil {
				return nil, err
			}
		}
		v := b.st.View()
		return &v, nil
	})
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	if err := e.syncTreeLimits(ctx, v); err != nil {
		return nil, fmt.Errorf("update the tree's budget of session %s: %w", sessionID, err)
	}
	return v, nil
}
