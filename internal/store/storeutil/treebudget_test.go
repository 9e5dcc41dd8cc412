package storeutil

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestTreeDecide walks the rule of a tree's budget case by case: what fits
// starts, what would cross starts alone, what is spent is refused.
func TestTreeDecide(t *testing.T) {
	dollar := store.TreeAmounts{CostUSD: 1}
	known := func(spent, reserved, maxCall store.TreeAmounts) *store.TreeBudgetRow {
		return &store.TreeBudgetRow{RootID: "ses_root", Limits: dollar, Spent: spent, Reserved: reserved, MaxCall: maxCall, SettledCalls: 1}
	}
	call := store.TreeAmounts{CostUSD: 0.3}
	tests := []struct {
		name    string
		ledger  *store.TreeBudgetRow
		kind    store.TreeCallKind
		hint    store.TreeAmounts
		unknown bool
		want    store.TreeReserveResult
	}{
		{
			name:   "no limits: every call starts",
			ledger: &store.TreeBudgetRow{RootID: "ses_root", Reserved: store.TreeAmounts{ModelCalls: 9}},
			kind:   store.TreeCallModel,
			want:   store.TreeReserveResult{Outcome: store.TreeGranted, Reserved: store.TreeAmounts{ModelCalls: 1}},
		},
		{
			name:   "no estimate yet: the first call goes alone",
			ledger: &store.TreeBudgetRow{RootID: "ses_root", Limits: dollar},
			kind:   store.TreeCallModel,
			want:   store.TreeReserveResult{Outcome: store.TreeGranted, Limit: "cost_usd", Exclusive: true, Reserved: store.TreeAmounts{ModelCalls: 1}},
		},
		{
			name:   "no estimate yet, a call in flight: wait",
			ledger: &store.TreeBudgetRow{RootID: "ses_root", Limits: dollar, Reserved: store.TreeAmounts{ModelCalls: 1}},
			kind:   store.TreeCallModel,
			want:   store.TreeReserveResult{Outcome: store.TreeBusy, Limit: "cost_usd"},
		},
		{
			name:   "fits next to the calls in flight",
			ledger: known(call, store.TreeAmounts{CostUSD: 0.3, ModelCalls: 1}, call),
			kind:   store.TreeCallModel,
			want:   store.TreeReserveResult{Outcome: store.TreeGranted, Reserved: store.TreeAmounts{CostUSD: 0.3, ModelCalls: 1}},
		},
		{
			name:    "the caller's first call goes alone even where it would fit",
			ledger:  known(call, store.TreeAmounts{CostUSD: 0.3, ModelCalls: 1}, call),
			kind:    store.TreeCallModel,
			unknown: true,
			want:    store.TreeReserveResult{Outcome: store.TreeBusy, Limit: "cost_usd"},
		},
		{
			name:   "a larger hint is the estimate",
			ledger: known(call, store.TreeAmounts{}, call),
			kind:   store.TreeCallModel,
			hint:   store.TreeAmounts{CostUSD: 0.8},
			want:   store.TreeReserveResult{Outcome: store.TreeGranted, Limit: "cost_usd", Exclusive: true, Reserved: store.TreeAmounts{CostUSD: 0.8, ModelCalls: 1}},
		},
		{
			name:   "would cross with calls in flight: wait",
			ledger: known(store.TreeAmounts{CostUSD: 0.6}, store.TreeAmounts{CostUSD: 0.3, ModelCalls: 1}, call),
			kind:   store.TreeCallModel,
			want:   store.TreeReserveResult{Outcome: store.TreeBusy, Limit: "cost_usd"},
		},
		{
			name:   "a call running alone holds the tree",
			ledger: &store.TreeBudgetRow{RootID: "ses_root", Limits: dollar, MaxCall: store.TreeAmounts{CostUSD: 0.01}, SettledCalls: 1, Exclusive: true, Reserved: store.TreeAmounts{ModelCalls: 1}},
			kind:   store.TreeCallModel,
			want:   store.TreeReserveResult{Outcome: store.TreeBusy, Limit: "exclusive"},
		},
		{
			name:   "a tool call does not wait for a model call running alone",
			ledger: &store.TreeBudgetRow{RootID: "ses_root", Limits: dollar, Exclusive: true, Reserved: store.TreeAmounts{ModelCalls: 1}},
			kind:   store.TreeCallTool,
			want:   store.TreeReserveResult{Outcome: store.TreeGranted, Reserved: store.TreeAmounts{ToolCalls: 1}},
		},
		{
			name:   "a spent limit refuses every call",
			ledger: known(store.TreeAmounts{CostUSD: 1.2}, store.TreeAmounts{}, call),
			kind:   store.TreeCallModel,
			want:   store.TreeReserveResult{Outcome: store.TreeExceeded, Limit: "cost_usd"},
		},
		{
			name: "tokens and model calls are limits too, in that order after cost",
			ledger: &store.TreeBudgetRow{RootID: "ses_root", Limits: store.TreeAmounts{Tokens: 100, ModelCalls: 2},
				Spent: store.TreeAmounts{Tokens: 100, ModelCalls: 2}, SettledCalls: 2},
			kind: store.TreeCallModel,
			want: store.TreeReserveResult{Outcome: store.TreeExceeded, Limit: "tokens"},
		},
		{
			name:   "the last model call waits for the one in flight",
			ledger: &store.TreeBudgetRow{RootID: "ses_root", Limits: store.TreeAmounts{ModelCalls: 2}, Spent: store.TreeAmounts{ModelCalls: 1}, Reserved: store.TreeAmounts{ModelCalls: 1}},
			kind:   store.TreeCallModel,
			want:   store.TreeReserveResult{Outcome: store.TreeBusy, Limit: "model_calls"},
		},
		{
			name:   "tool calls never cross",
			ledger: &store.TreeBudgetRow{RootID: "ses_root", Limits: store.TreeAmounts{ToolCalls: 3}, Spent: store.TreeAmounts{ToolCalls: 1}, Reserved: store.TreeAmounts{ToolCalls: 2}},
			kind:   store.TreeCallTool,
			want:   store.TreeReserveResult{Outcome: store.TreeBusy, Limit: "tool_calls"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := TreeDecide(tc.ledger, tc.kind, tc.hint, tc.unknown)
			tc.want.Ledger = *tc.ledger
			require.Equal(t, tc.want, got)
		})
	}
}

// TestTreeMaxCall: the estimate grows to the largest call, per call of a
// settlement that holds several.
func TestTreeMaxCall(t *testing.T) {
	cur := store.TreeAmounts{CostUSD: 0.2, Tokens: 300}
	require.Equal(t, cur, TreeMaxCall(cur, store.TreeAmounts{ToolCalls: 4}), "no model call: no estimate")
	require.Equal(t, store.TreeAmounts{CostUSD: 0.25, Tokens: 300}, TreeMaxCall(cur, store.TreeAmounts{CostUSD: 0.5, Tokens: 400, ModelCalls: 2}))
}

// TestTreeChecks: bad parameters are refused naming the field.
func TestTreeChecks(t *testing.T) {
	valid := func() *store.TreeReserveParams {
		return &store.TreeReserveParams{
			RootID: "ses_root", ID: "res_1", Lease: store.Lease{SessionID: "ses_a", Owner: "node", Epoch: 1},
			Kind: store.TreeCallModel, Now: testTime,
		}
	}
	require.NoError(t, lenient.TreeReserve(valid()))
	for field, mod := range map[string]func(p *store.TreeReserveParams){
		"root_id":           func(p *store.TreeReserveParams) { p.RootID = "" },
		"id":                func(p *store.TreeReserveParams) { p.ID = "" },
		"lease.owner":       func(p *store.TreeReserveParams) { p.Lease.Owner = "" },
		"kind":              func(p *store.TreeReserveParams) { p.Kind = "shell" },
		"hint.cost_usd":     func(p *store.TreeReserveParams) { p.Hint.CostUSD = -1 },
		"limits.tool_calls": func(p *store.TreeReserveParams) { p.Limits = &store.TreeAmounts{ToolCalls: -2} },
		"now":               func(p *store.TreeReserveParams) { p.Now = time.Time{} },
	} {
		p := valid()
		mod(p)
		require.ErrorContains(t, lenient.TreeReserve(p), field, field)
	}
	require.ErrorContains(t, lenient.TreeSettle(&store.TreeSettle{RootID: "ses_root", Release: []string{""}}), "tree_settle.release[0]")
	require.ErrorContains(t, lenient.TreeBudgetPut(&store.TreeBudgetPutParams{RootID: "ses_root", Now: testTime, Spent: store.TreeAmounts{Tokens: -1}}), "spent.tokens")
}
