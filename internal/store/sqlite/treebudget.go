package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// liveReservation is the condition of a reservation that still counts: its
// session's lease is the one it was made under.
const liveReservation = `EXISTS (SELECT 1 FROM sessions s
    WHERE s.id = r.session_id AND s.lease_owner = r.lease_owner AND s.lease_epoch = r.lease_epoch)`

// treeLedgerSQL reads a tree's ledger with its live reservations summed,
// leaving out the reservation named by the first argument.
const treeLedgerSQL = `SELECT b.limit_cost_usd, b.limit_tokens, b.limit_model_calls, b.limit_tool_calls,
    b.spent_cost_usd, b.spent_tokens, b.spent_model_calls, b.spent_tool_calls,
    b.max_call_cost_usd, b.max_call_tokens, b.settled_calls, b.updated_at,
    coalesce(sum(r.cost_usd), 0), coalesce(sum(r.tokens), 0), coalesce(sum(r.model_calls), 0),
    coalesce(sum(r.tool_calls), 0), coalesce(max(r.exclusive), 0)
FROM tree_budgets b
LEFT JOIN tree_reservations r ON r.root_id = b.root_id AND r.id <> ? AND ` + liveReservation + `
WHERE b.root_id = ?
GROUP BY b.root_id`

func scanTreeLedger(row *sql.Row, rootID string) (*store.TreeBudgetRow, error) {
	l := store.TreeBudgetRow{RootID: rootID}
	var (
		updated   int64
		exclusive int64
	)
	err := row.Scan(&l.Limits.CostUSD, &l.Limits.Tokens, &l.Limits.ModelCalls, &l.Limits.ToolCalls,
		&l.Spent.CostUSD, &l.Spent.Tokens, &l.Spent.ModelCalls, &l.Spent.ToolCalls,
		&l.MaxCall.CostUSD, &l.MaxCall.Tokens, &l.SettledCalls, &updated,
		&l.Reserved.CostUSD, &l.Reserved.Tokens, &l.Reserved.ModelCalls, &l.Reserved.ToolCalls, &exclusive)
	if err != nil {
		return nil, mapErr(err)
	}
	l.UpdatedAt, l.Exclusive = fromMicros(updated), exclusive != 0
	return &l, nil
}

// TreeBudgetPut creates the tree's ledger, or replaces its limits and raises
// its spent to p.Spent where behind.
func (s *Store) TreeBudgetPut(ctx context.Context, p *store.TreeBudgetPutParams) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.TreeBudgetPut(p); err != nil {
		return fmt.Errorf("put tree budget: %w", err)
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		_, err := w.exec(`INSERT INTO tree_budgets (root_id, limit_cost_usd, limit_tokens, limit_model_calls, limit_tool_calls,
    spent_cost_usd, spent_tokens, spent_model_calls, spent_tool_calls, updated_at, limits_seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (root_id) DO UPDATE SET `+storeutil.NewerTreeLimits("max", "excluded.limit_cost_usd", "excluded.limit_tokens", "excluded.limit_model_calls", "excluded.limit_tool_calls", "excluded.limits_seq")+`,
    spent_cost_usd = max(spent_cost_usd, excluded.spent_cost_usd), spent_tokens = max(spent_tokens, excluded.spent_tokens),
    spent_model_calls = max(spent_model_calls, excluded.spent_model_calls),
    spent_tool_calls = max(spent_tool_calls, excluded.spent_tool_calls),
    updated_at = excluded.updated_at`,
			p.RootID, p.Limits.CostUSD, p.Limits.Tokens, p.Limits.ModelCalls, p.Limits.ToolCalls,
			p.Spent.CostUSD, p.Spent.Tokens, p.Spent.ModelCalls, p.Spent.ToolCalls, toMicros(p.Now), p.LimitsSeq)
		return nil, mapErr(err)
	}})
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
	row, err := s.queryRow(ctx, treeLedgerSQL, "", rootID)
	if err != nil {
		return nil, fmt.Errorf("get tree budget %s: %w", rootID, err)
	}
	l, err := scanTreeLedger(row, rootID)
	if err != nil {
		return nil, fmt.Errorf("get tree budget %s: %w", rootID, s.readErr(err))
	}
	return l, nil
}

// TreeReserve decides on the call under the write lock, so it sees every
// reservation committed before it and none can commit in between.
func (s *Store) TreeReserve(ctx context.Context, p *store.TreeReserveParams) (*store.TreeReserveResult, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.TreeReserve(p); err != nil {
		return nil, fmt.Errorf("reserve in tree budget: %w", err)
	}
	var res store.TreeReserveResult
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		if p.Limits != nil {
			n, err := w.changed(`UPDATE tree_budgets SET `+storeutil.NewerTreeLimits("max", "?1", "?2", "?3", "?4", "?6")+`
WHERE root_id = ?5`, p.Limits.CostUSD, p.Limits.Tokens, p.Limits.ModelCalls, p.Limits.ToolCalls, p.RootID, p.LimitsSeq)
			if err != nil {
				return nil, mapErr(err)
			}
			if n == 0 {
				return nil, store.ErrNotFound
			}
		}
		// Reservations of workers whose lease ended are over; so is an
		// earlier reservation of this id (the same call reserved again) or
		// of this session and kind (TreeReserveParams.ID).
		if _, err := w.exec(`DELETE FROM tree_reservations AS r WHERE root_id = ? AND (id = ? OR (session_id = ? AND kind = ?) OR NOT `+liveReservation+`)`,
			p.RootID, p.ID, p.Lease.SessionID, string(p.Kind)); err != nil {
			return nil, mapErr(err)
		}
		l, err := scanTreeLedger(w.queryRow(treeLedgerSQL, p.ID, p.RootID), p.RootID)
		if err != nil {
			return nil, err
		}
		res = storeutil.TreeDecide(l, p.Kind, p.Hint, p.Unknown)
		if res.Outcome != store.TreeGranted {
			return nil, nil
		}
		a := res.Reserved
		_, err = w.exec(`INSERT INTO tree_reservations (root_id, id, session_id, lease_owner, lease_epoch, kind, exclusive,
    cost_usd, tokens, model_calls, tool_calls, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.RootID, p.ID, p.Lease.SessionID, p.Lease.Owner, p.Lease.Epoch, string(p.Kind), boolInt(res.Exclusive),
			a.CostUSD, a.Tokens, a.ModelCalls, a.ToolCalls, toMicros(p.Now))
		return nil, mapErr(err)
	}})
	if err != nil {
		return nil, fmt.Errorf("reserve %s in tree budget %s: %w", p.ID, p.RootID, err)
	}
	return &res, nil
}

// settleTree ends an append's settled reservations and spends its usage,
// in the append's transaction.
func (w *writer) settleTree(ts *store.TreeSettle, now int64) error {
	if ts == nil {
		return nil
	}
	for _, id := range ts.Release {
		if _, err := w.exec(`DELETE FROM tree_reservations WHERE root_id = ? AND id = ?`, ts.RootID, id); err != nil {
			return fmt.Errorf("settle tree budget %s: %w", ts.RootID, mapErr(err))
		}
	}
	if ts.Used.IsZero() {
		return nil
	}
	u, m := ts.Used, storeutil.TreeMaxCall(store.TreeAmounts{}, ts.Used)
	_, err := w.exec(`UPDATE tree_budgets SET spent_cost_usd = spent_cost_usd + ?, spent_tokens = spent_tokens + ?,
    spent_model_calls = spent_model_calls + ?, spent_tool_calls = spent_tool_calls + ?,
    max_call_cost_usd = max(max_call_cost_usd, ?), max_call_tokens = max(max_call_tokens, ?),
    settled_calls = settled_calls + ?, updated_at = ?
WHERE root_id = ?`, u.CostUSD, u.Tokens, u.ModelCalls, u.ToolCalls, m.CostUSD, m.Tokens, u.ModelCalls, now, ts.RootID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("settle tree budget %s: %w", ts.RootID, mapErr(err))
	}
	return nil
}
