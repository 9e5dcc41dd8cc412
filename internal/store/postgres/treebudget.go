package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// liveReservation is the condition of a reservation that still counts: its
// session's lease is the one it was made under.
const liveReservation = `EXISTS (SELECT 1 FROM sessions s
    WHERE s.id = r.session_id AND s.lease_owner = r.lease_owner AND s.lease_epoch = r.lease_epoch)`

// treeLedgerSQL reads a tree's ledger with its live reservations summed,
// leaving out the reservation $1.
const treeLedgerSQL = `SELECT b.limit_cost_usd, b.limit_tokens, b.limit_model_calls, b.limit_tool_calls,
    b.spent_cost_usd, b.spent_tokens, b.spent_model_calls, b.spent_tool_calls,
    b.max_call_cost_usd, b.max_call_tokens, b.settled_calls, b.updated_at,
    coalesce(sum(r.cost_usd), 0), coalesce(sum(r.tokens), 0)::bigint, coalesce(sum(r.model_calls), 0)::bigint,
    coalesce(sum(r.tool_calls), 0)::bigint, coalesce(bool_or(r.exclusive), false)
FROM tree_budgets b
LEFT JOIN tree_reservations r ON r.root_id = b.root_id AND r.id <> $1 AND ` + liveReservation + `
WHERE b.root_id = $2
GROUP BY b.root_id`

func scanTreeLedger(row pgx.Row, l *store.TreeBudgetRow) error {
	var updated time.Time
	err := row.Scan(&l.Limits.CostUSD, &l.Limits.Tokens, &l.Limits.ModelCalls, &l.Limits.ToolCalls,
		&l.Spent.CostUSD, &l.Spent.Tokens, &l.Spent.ModelCalls, &l.Spent.ToolCalls,
		&l.MaxCall.CostUSD, &l.MaxCall.Tokens, &l.SettledCalls, &updated,
		&l.Reserved.CostUSD, &l.Reserved.Tokens, &l.Reserved.ModelCalls, &l.Reserved.ToolCalls, &l.Exclusive)
	l.UpdatedAt = updated.UTC()
	return err
}

// TreeBudgetPut creates the tree's ledger, or replaces its limits and raises
// its spent to p.Spent where behind, in one statement.
func (s *Store) TreeBudgetPut(ctx context.Context, p *store.TreeBudgetPutParams) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.TreeBudgetPut(p); err != nil {
		return fmt.Errorf("put tree budget: %w", err)
	}
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		t.queue(`INSERT INTO tree_budgets (root_id, limit_cost_usd, limit_tokens, limit_model_calls, limit_tool_calls,
    spent_cost_usd, spent_tokens, spent_model_calls, spent_tool_calls, updated_at, limits_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (root_id) DO UPDATE SET `+storeutil.NewerTreeLimits("greatest", "excluded.limit_cost_usd", "excluded.limit_tokens", "excluded.limit_model_calls", "excluded.limit_tool_calls", "excluded.limits_seq")+`,
    spent_cost_usd = greatest(tree_budgets.spent_cost_usd, excluded.spent_cost_usd),
    spent_tokens = greatest(tree_budgets.spent_tokens, excluded.spent_tokens),
    spent_model_calls = greatest(tree_budgets.spent_model_calls, excluded.spent_model_calls),
    spent_tool_calls = greatest(tree_budgets.spent_tool_calls, excluded.spent_tool_calls),
    updated_at = excluded.updated_at`,
			p.RootID, p.Limits.CostUSD, p.Limits.Tokens, p.Limits.ModelCalls, p.Limits.ToolCalls,
			p.Spent.CostUSD, p.Spent.Tokens, p.Spent.ModelCalls, p.Spent.ToolCalls, p.Now, p.LimitsSeq)
		return nil
	})
	if err != nil {
		return fmt.Errorf("put tree budget %s: %w", p.RootID, err)
	}
	return nil
}

// TreeBudgetGet returns the tree's ledger with its live reservations summed.
func (s *Store) TreeBudgetGet(ctx context.Context, rootID string) (*store.TreeBudgetRow, error) {
	if err := checks.ID("root_id", rootID); err != nil {
		return nil, fmt.Errorf("get tree budget: %w", err)
	}
	l := store.TreeBudgetRow{RootID: rootID}
	err := s.queryRow(ctx, func(row pgx.Row) error { return scanTreeLedger(row, &l) }, treeLedgerSQL, "", rootID)
	if err != nil {
		return nil, fmt.Errorf("get tree budget %s: %w", rootID, err)
	}
	return &l, nil
}

// TreeReserve decides on the call with the tree's row locked, so the
// reservations of every node are decided one after another.
func (s *Store) TreeReserve(ctx context.Context, p *store.TreeReserveParams) (*store.TreeReserveResult, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.TreeReserve(p); err != nil {
		return nil, fmt.Errorf("reserve in tree budget: %w", err)
	}
	var res store.TreeReserveResult
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		found := false
		if p.Limits != nil {
			t.queue(`UPDATE tree_budgets SET `+storeutil.NewerTreeLimits("greatest", "$1", "$2", "$3", "$4", "$6")+`
WHERE root_id = $5 RETURNING true`, p.Limits.CostUSD, p.Limits.Tokens, p.Limits.ModelCalls, p.Limits.ToolCalls, p.RootID, p.LimitsSeq).
				QueryRow(func(r pgx.Row) error { return r.Scan(&found) })
		} else {
			t.queue(`SELECT true FROM tree_budgets WHERE root_id = $1 FOR UPDATE`, p.RootID).
				QueryRow(func(r pgx.Row) error { return r.Scan(&found) })
		}
		// Reservations of workers whose lease ended are over; so is an
		// earlier reservation of this id (the same call reserved again) or
		// of this session and kind (TreeReserveParams.ID).
		t.queue(`DELETE FROM tree_reservations AS r WHERE root_id = $1 AND (id = $2 OR (session_id = $3 AND kind = $4) OR NOT `+liveReservation+`)`,
			p.RootID, p.ID, p.Lease.SessionID, string(p.Kind))
		l := store.TreeBudgetRow{RootID: p.RootID}
		t.queue(treeLedgerSQL, p.ID, p.RootID).QueryRow(func(r pgx.Row) error { return scanTreeLedger(r, &l) })
		if err := t.flush(ctx); err != nil {
			return err
		}
		res = storeutil.TreeDecide(&l, p.Kind, p.Hint, p.Unknown)
		if res.Outcome != store.TreeGranted {
			return nil
		}
		a := res.Reserved
		t.queue(`INSERT INTO tree_reservations (root_id, id, session_id, lease_owner, lease_epoch, kind, exclusive,
    cost_usd, tokens, model_calls, tool_calls, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			p.RootID, p.ID, p.Lease.SessionID, p.Lease.Owner, p.Lease.Epoch, string(p.Kind), res.Exclusive,
			a.CostUSD, a.Tokens, a.ModelCalls, a.ToolCalls, p.Now)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reserve %s in tree budget %s: %w", p.ID, p.RootID, err)
	}
	return &res, nil
}

// queueSettleTree queues, in an append's transaction, the end of its
// settled reservations and the spending of its usage.
func queueSettleTree(t *txn, ts *store.TreeSettle, now time.Time) {
	if ts == nil {
		return
	}
	if len(ts.Release) > 0 {
		t.queue(`DELETE FROM tree_reservations WHERE root_id = $1 AND id = ANY($2)`, ts.RootID, ts.Release)
	}
	if ts.Used.IsZero() {
		return
	}
	u, m := ts.Used, storeutil.TreeMaxCall(store.TreeAmounts{}, ts.Used)
	t.queue(`UPDATE tree_budgets SET spent_cost_usd = spent_cost_usd + $1, spent_tokens = spent_tokens + $2,
    spent_model_calls = spent_model_calls + $3, spent_tool_calls = spent_tool_calls + $4,
    max_call_cost_usd = greatest(max_call_cost_usd, $5), max_call_tokens = greatest(max_call_tokens, $6),
    settled_calls = settled_calls + $3, updated_at = $7
WHERE root_id = $8`, u.CostUSD, u.Tokens, u.ModelCalls, u.ToolCalls, m.CostUSD, m.Tokens, now, ts.RootID)
}
