package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// RunnerConnect records a runner's connection, replacing the row of its
// (project, name) only when the same key holds it or the row was not seen
// since staleBefore (ErrConflict otherwise).
func (s *Store) RunnerConnect(ctx context.Context, row *store.RunnerRow, staleBefore time.Time) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.RunnerRow(row); err != nil {
		return fmt.Errorf("record runner: %w", err)
	}
	n, err := s.exec(ctx, `INSERT INTO runners (project, name, conn_id, key_id, node, labels, capacity, version, connected_at, seen_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (project, name) DO UPDATE SET conn_id = excluded.conn_id, key_id = excluded.key_id, node = excluded.node,
  labels = excluded.labels, capacity = excluded.capacity, version = excluded.version,
  connected_at = excluded.connected_at, seen_at = excluded.seen_at
WHERE runners.key_id = excluded.key_id OR runners.seen_at < $11`,
		row.Project, row.Name, row.ConnID, row.KeyID, row.Node, storeutil.NonNil(row.Labels), row.Capacity, row.Version,
		row.ConnectedAt, row.SeenAt, staleBefore)
	if err != nil {
		return fmt.Errorf("record runner %s: %w", row.Name, err)
	}
	if n == 0 {
		return fmt.Errorf("record runner %s: held by another key: %w", row.Name, store.ErrConflict)
	}
	return nil
}

// RunnerTouch records a sign of life of the connection connID.
func (s *Store) RunnerTouch(ctx context.Context, project, name, connID string, at time.Time) error {
	if err := checks.RunnerKey(project, name, connID); err != nil {
		return fmt.Errorf("touch runner: %w", err)
	}
	if err := checks.Time("at", at); err != nil {
		return fmt.Errorf("touch runner: %w", err)
	}
	n, err := s.exec(ctx, `UPDATE runners SET seen_at = greatest(seen_at, $1) WHERE project = $2 AND name = $3 AND conn_id = $4`,
		at, project, name, connID)
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("touch runner %s: %w", name, err)
	}
	return nil
}

// RunnerDisconnect deletes the row of (project, name) if connID holds it.
func (s *Store) RunnerDisconnect(ctx context.Context, project, name, connID string) error {
	if err := checks.RunnerKey(project, name, connID); err != nil {
		return fmt.Errorf("remove runner: %w", err)
	}
	if _, err := s.exec(ctx, `DELETE FROM runners WHERE project = $1 AND name = $2 AND conn_id = $3`, project, name, connID); err != nil {
		return fmt.Errorf("remove runner %s: %w", name, err)
	}
	return nil
}

// RunnerList returns the runners of project ("": all) seen since
// seenSince.
func (s *Store) RunnerList(ctx context.Context, project string, seenSince time.Time) ([]*store.RunnerRow, error) {
	if err := checks.Text("project", project); err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	var out []*store.RunnerRow
	err := s.query(ctx, func(rows pgx.Rows) error {
		var r store.RunnerRow
		if err := rows.Scan(&r.Project, &r.Name, &r.ConnID, &r.KeyID, &r.Node, &r.Labels, &r.Capacity, &r.Version, &r.ConnectedAt, &r.SeenAt); err != nil {
			return err
		}
		r.Labels = storeutil.NonNil(r.Labels)
		r.ConnectedAt, r.SeenAt = r.ConnectedAt.UTC(), r.SeenAt.UTC()
		out = append(out, &r)
		return nil
	}, `SELECT project, name, conn_id, key_id, node, labels, capacity, version, connected_at, seen_at FROM runners
WHERE ($1 = '' OR project = $1) AND seen_at >= $2 ORDER BY project, name`, project, seenSince)
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	return out, nil
}
