package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// AuditAppend stores row as the next entry of the audit log.
func (s *Store) AuditAppend(ctx context.Context, row *store.AuditRow) (int64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	targets, err := checks.AuditAppend(row)
	if err != nil {
		return 0, fmt.Errorf("append audit entry: %w", err)
	}
	var seq int64
	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		res, err := w.exec(`INSERT INTO audit_log (time, key_id, actor_name, actor_role, key_prefix, remote, method, route, targets, status, request_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			toMicros(row.Time), row.KeyID, row.ActorName, row.ActorRole, row.KeyPrefix, row.Remote,
			row.Method, row.Route, targets, row.Status, row.RequestID)
		if err != nil {
			return nil, mapErr(err)
		}
		seq, err = res.LastInsertId()
		return nil, err
	}})
	if err != nil {
		return 0, fmt.Errorf("append audit entry: %w", err)
	}
	return seq, nil
}

// AuditList returns a page of the audit log, oldest first.
func (s *Store) AuditList(ctx context.Context, p *store.AuditListParams) ([]*store.AuditRow, error) {
	limit, err := checks.AuditListParams(p)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	var since any // NULL: no lower bound
	if !p.Since.IsZero() {
		since = toMicros(p.Since)
	}
	var out []*store.AuditRow
	err = s.query(ctx, func(rows *sql.Rows) error {
		var (
			r       store.AuditRow
			t       int64
			targets string
		)
		if err := rows.Scan(&r.Seq, &t, &r.KeyID, &r.ActorName, &r.ActorRole, &r.KeyPrefix, &r.Remote,
			&r.Method, &r.Route, &targets, &r.Status, &r.RequestID); err != nil {
			return err
		}
		r.Time = fromMicros(t)
		var err error
		if r.Targets, err = storeutil.ParseAuditTargets([]byte(targets)); err != nil {
			return fmt.Errorf("audit entry %d: %w", r.Seq, err)
		}
		out = append(out, &r)
		return nil
	}, `SELECT seq, time, key_id, actor_name, actor_role, key_prefix, remote, method, route, targets, status, request_id
FROM audit_log
WHERE seq > ?1 AND (?2 IS NULL OR time >= ?2) AND (?3 = '' OR key_id = ?3 OR actor_name = ?3 OR key_prefix = ?3)
ORDER BY seq LIMIT ?4`, p.After, since, p.Actor, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	return out, nil
}

// AuditPrune deletes the entries older than before.
func (s *Store) AuditPrune(ctx context.Context, before time.Time) (int64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	if err := checks.Time("before", before); err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	var n int64
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var err error
		n, err = w.changed(`DELETE FROM audit_log WHERE time < ?`, toMicros(before))
		return nil, mapErr(err)
	}})
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}
