package storeutil

import (
	"errors"
	"fmt"
	"math"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// TreeDecide is the rule of a tree's budget, the same for every driver:
// l is the ledger with its live reservations summed (this reservation's id
// left out). A call may start when, on every limited dimension it uses,
// spent + reserved + its estimate stays within the limit. When it would
// cross a limit (or its cost is not known yet: no model call settled), it
// may start only alone, when no other call of its kind is in flight, and
// then it holds the tree exclusively until it settles. So at most one call
// of the whole tree crosses a limit, and the tree spends at most its limits
// plus that one call. A limit already spent refuses every call.
//
// The estimate of a model call is the larger of hint (what the caller knows
// before the call: the cost and tokens of its input and of its longest
// answer) and the largest model call the tree settled; unknown (the
// caller's first call) makes it unknown. A model call or a tool call
// counts 1.
func TreeDecide(l *store.TreeBudgetRow, kind store.TreeCallKind, hint store.TreeAmounts, unknown bool) store.TreeReserveResult {
	out := store.TreeReserveResult{Ledger: *l}
	type dim struct {
		name         string
		limit, spent float64
		reserved     float64
		est          float64
		known        bool
	}
	var dims []dim
	if kind == store.TreeCallTool {
		dims = []dim{{"tool_calls", float64(l.Limits.ToolCalls), float64(l.Spent.ToolCalls), float64(l.Reserved.ToolCalls), 1, true}}
		out.Reserved = store.TreeAmounts{ToolCalls: 1}
	} else {
		known := l.SettledCalls > 0 && !unknown
		est := store.TreeAmounts{
			CostUSD:    math.Max(hint.CostUSD, l.MaxCall.CostUSD),
			Tokens:     max(hint.Tokens, l.MaxCall.Tokens),
			ModelCalls: 1,
		}
		dims = []dim{
			{"cost_usd", l.Limits.CostUSD, l.Spent.CostUSD, l.Reserved.CostUSD, est.CostUSD, known},
			{"tokens", float64(l.Limits.Tokens), float64(l.Spent.Tokens), float64(l.Reserved.Tokens), float64(est.Tokens), known},
			{"model_calls", float64(l.Limits.ModelCalls), float64(l.Spent.ModelCalls), float64(l.Reserved.ModelCalls), 1, true},
		}
		out.Reserved = est
	}
	crossing := ""
	for _, d := range dims {
		if d.limit <= 0 {
			continue
		}
		if d.spent >= d.limit {
			return store.TreeReserveResult{Outcome: store.TreeExceeded, Limit: d.name, Ledger: *l}
		}
		if crossing == "" && (!d.known || d.spent+d.reserved+d.est > d.limit) {
			crossing = d.name
		}
	}
	if kind == store.TreeCallModel && l.Exclusive {
		// The call crossing a limit runs alone until it settles.
		return store.TreeReserveResult{Outcome: store.TreeBusy, Limit: "exclusive", Ledger: *l}
	}
	if crossing != "" {
		inFlight := l.Reserved.ModelCalls
		if kind == store.TreeCallTool {
			inFlight = l.Reserved.ToolCalls
		}
		if inFlight > 0 {
			return store.TreeReserveResult{Outcome: store.TreeBusy, Limit: crossing, Ledger: *l}
		}
		out.Limit, out.Exclusive = crossing, kind == store.TreeCallModel
	}
	out.Outcome = store.TreeGranted
	return out
}

// TreeMaxCall returns the ledger's largest model call after settling used:
// used's cost and tokens per model call, if larger.
func TreeMaxCall(cur, used store.TreeAmounts) store.TreeAmounts {
	if used.ModelCalls <= 0 {
		return cur
	}
	n := used.ModelCalls
	cur.CostUSD = math.Max(cur.CostUSD, used.CostUSD/float64(n))
	cur.Tokens = max(cur.Tokens, used.Tokens/n)
	return cur
}

// TreeAmounts checks amounts: finite, not negative.
func (Checks) TreeAmounts(field string, a store.TreeAmounts) error {
	if math.IsNaN(a.CostUSD) || math.IsInf(a.CostUSD, 0) || a.CostUSD < 0 {
		return fmt.Errorf("%s.cost_usd must be a finite amount >= 0, got %v", field, a.CostUSD)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"tokens", a.Tokens}, {"model_calls", a.ModelCalls}, {"tool_calls", a.ToolCalls}} {
		if f.v < 0 {
			return fmt.Errorf("%s.%s must not be negative, got %d", field, f.name, f.v)
		}
	}
	return nil
}

// TreeBudgetPut checks the parameters of Store.TreeBudgetPut.
func (c Checks) TreeBudgetPut(p *store.TreeBudgetPutParams) error {
	if p == nil {
		return errors.New("params are nil")
	}
	if err := c.ID("root_id", p.RootID); err != nil {
		return err
	}
	if err := c.TreeAmounts("limits", p.Limits); err != nil {
		return err
	}
	if p.LimitsSeq < 0 {
		return fmt.Errorf("limits_seq must not be negative, got %d", p.LimitsSeq)
	}
	if err := c.TreeAmounts("spent", p.Spent); err != nil {
		return err
	}
	return c.Time("now", p.Now)
}

// TreeReserve checks the parameters of Store.TreeReserve.
func (c Checks) TreeReserve(p *store.TreeReserveParams) error {
	if p == nil {
		return errors.New("params are nil")
	}
	if err := c.ID("root_id", p.RootID); err != nil {
		return err
	}
	if err := c.ID("id", p.ID); err != nil {
		return err
	}
	if err := c.ID("lease.session_id", p.Lease.SessionID); err != nil {
		return err
	}
	if err := c.ID("lease.owner", p.Lease.Owner); err != nil {
		return err
	}
	if p.Kind != store.TreeCallModel && p.Kind != store.TreeCallTool {
		return fmt.Errorf("kind must be %q or %q, got %q", store.TreeCallModel, store.TreeCallTool, p.Kind)
	}
	if err := c.TreeAmounts("hint", p.Hint); err != nil {
		return err
	}
	if p.Limits != nil {
		if err := c.TreeAmounts("limits", *p.Limits); err != nil {
			return err
		}
	}
	if p.LimitsSeq < 0 {
		return fmt.Errorf("limits_seq must not be negative, got %d", p.LimitsSeq)
	}
	return c.Time("now", p.Now)
}

// TreeSettle checks an append's settlement.
func (c Checks) TreeSettle(s *store.TreeSettle) error {
	if s == nil {
		return nil
	}
	if err := c.ID("tree_settle.root_id", s.RootID); err != nil {
		return err
	}
	for i, id := range s.Release {
		if err := c.ID(fmt.Sprintf("tree_settle.release[%d]", i), id); err != nil {
			return err
		}
	}
	return c.TreeAmounts("tree_settle.used", s.Used)
}

// NewerTreeLimits is the SET list of an UPDATE of tree_budgets that
// replaces a ledger's limits with the SQL expressions costUSD, tokens,
// modelCalls and toolCalls read at the root's journal seq (an expression
// too), unless the ledger holds limits of a later seq
// (store.TreeBudgetPutParams.LimitsSeq). greatest is the dialect's
// two-argument maximum (SQLite's max, PostgreSQL's greatest). Every SET
// reads the row as it was, so the limits_seq it sets last does not count
// in the others.
func NewerTreeLimits(greatest, costUSD, tokens, modelCalls, toolCalls, seq string) string {
	newer := seq + ` >= tree_budgets.limits_seq`
	return `limit_cost_usd = CASE WHEN ` + newer + ` THEN ` + costUSD + ` ELSE tree_budgets.limit_cost_usd END,
    limit_tokens = CASE WHEN ` + newer + ` THEN ` + tokens + ` ELSE tree_budgets.limit_tokens END,
    limit_model_calls = CASE WHEN ` + newer + ` THEN ` + modelCalls + ` ELSE tree_budgets.limit_model_calls END,
    limit_tool_calls = CASE WHEN ` + newer + ` THEN ` + toolCalls + ` ELSE tree_budgets.limit_tool_calls END,
    limits_seq = ` + greatest + `(tree_budgets.limits_seq, ` + seq + `)`
}
