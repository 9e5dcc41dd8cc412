package sqlite

import (
	"context"
	"database/sql"
	"fmt"

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
	err = s.query(ctx, func(rows *sql.Rows) error {
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

// actionListQuery builds the statement of ActionListAll. As in SessionList,
// there is one statement shape per combination of filters, each able to use
// an index (actions_status, actions_type, actions_session); the shapes are
// few and their statements cached.
func actionListQuery(p *store.ActionListParams, limit int) (string, []any, error) {
	q := `SELECT id, session_id, status, doc, created_at FROM actions WHERE 1 = 1`
	var args []any
	if p.Project != "" {
		// Through the session's row (its primary key): an action is in
		// its session's project.
		q += ` AND session_id IN (SELECT id FROM sessions WHERE project = ?)`
		args = append(args, p.Project)
	}
	if p.Status != "" {
		q += ` AND status = ?`
		args = append(args, p.Status)
	}
	if p.Type != "" {
		// The same expression as the actions_type index.
		q += ` AND json_extract(doc, '$.type') = ?`
		args = append(args, p.Type)
	}
	if p.SessionID != "" {
		q += ` AND session_id = ?`
		args = append(args, p.SessionID)
	}
	if p.After != nil {
		if err := checks.Time("after.created_at", p.After.CreatedAt); err != nil {
			return "", nil, err
		}
		created := toMicros(p.After.CreatedAt)
		q += ` AND (created_at > ? OR (created_at = ? AND id > ?))`
		args = append(args, created, created, p.After.ID)
	}
	q += ` ORDER BY created_at, id LIMIT ?`
	return q, append(args, limit), nil
}

// ActionPendingStats counts the pending actions by type, with the oldest
// creation time of each: it reads the pending rows of actions_status only
// (a few, however many actions were ever resolved).
func (s *Store) ActionPendingStats(ctx context.Context) ([]store.ActionTypeStats, error) {
	var out []store.ActionTypeStats
	err := s.query(ctx, func(rows *sql.Rows) error {
		var (
			typ    sql.NullString
			n      int64
			oldest int64
		)
		if err := rows.Scan(&typ, &n, &oldest); err != nil {
			return err
		}
		out = append(out, store.ActionTypeStats{Type: typ.String, Count: n, OldestCreatedAt: fromMicros(oldest)})
		return nil
	}, `SELECT json_extract(doc, '$.type') AS type, count(*), min(created_at) FROM actions
WHERE status = 'pending' GROUP BY type ORDER BY type`)
	if err != nil {
		return nil, fmt.Errorf("count pending actions: %w", err)
	}
	return out, nil
}
