package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// ActionListAll lists required actions across sessions in creation order
// (created_at, then id), filtered by the non-empty fields of p and starting
// after p.After. Limit 0 means 50; more than 1000 is an error. An unknown
// session lists nothing.
func (s *Store) ActionListAll(ctx context.Context, p *store.ActionListParams) ([]*store.DocRow, error) {
	if p == nil {
		p = &store.ActionListParams{}
	}
	limit, err := storeutil.ActionPage.Limit(p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	q, args, err := actionListQuery(p, limit)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	out := make([]*store.DocRow, 0, min(limit, 64))
	err = s.query(ctx, func(rows pgx.Rows) error {
		d, err := scanDoc(rows)
		if err != nil {
			return err
		}
		out = append(out, d)
		return nil
	}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}

// actionListQuery builds the statement of ActionListAll: one shape per
// combination of filters, each able to use an index (actions_status,
// actions_type, actions_session) that also gives the order.
func actionListQuery(p *store.ActionListParams, limit int) (string, []any, error) {
	q := `SELECT ` + docColumns + ` FROM actions WHERE true`
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.Project != "" {
		// Through the session's row (its primary key): an action is in
		// its session's project.
		q += ` AND session_id IN (SELECT id FROM sessions WHERE project = ` + arg(p.Project) + `)`
	}
	if p.Status != "" {
		q += ` AND status = ` + arg(p.Status)
	}
	if p.Type != "" {
		q += ` AND type = ` + arg(p.Type)
	}
	if p.SessionID != "" {
		q += ` AND session_id = ` + arg(p.SessionID)
	}
	if p.After != nil {
		if err := checks.Time("after.created_at", p.After.CreatedAt); err != nil {
			return "", nil, err
		}
		q += ` AND (created_at, id) > (` + arg(p.After.CreatedAt) + `, ` + arg(p.After.ID) + `)`
	}
	q += ` ORDER BY created_at, id LIMIT ` + arg(limit)
	return q, args, nil
}

// ActionPendingStats counts the pending actions by type, with the oldest
// creation time of each: it reads the pending rows of actions_status only
// (a few, however many actions were ever resolved).
func (s *Store) ActionPendingStats(ctx context.Context) ([]store.ActionTypeStats, error) {
	var out []store.ActionTypeStats
	err := s.query(ctx, func(rows pgx.Rows) error {
		var (
			typ *string
			st  store.ActionTypeStats
		)
		if err := rows.Scan(&typ, &st.Count, &st.OldestCreatedAt); err != nil {
			return err
		}
		if typ != nil {
			st.Type = *typ
		}
		st.OldestCreatedAt = st.OldestCreatedAt.UTC()
		out = append(out, st)
		return nil
	}, `SELECT type, count(*), min(created_at) FROM actions WHERE status = 'pending' GROUP BY type ORDER BY type`)
	if err != nil {
		return nil, fmt.Errorf("count pending actions: %w", err)
	}
	return out, nil
}
