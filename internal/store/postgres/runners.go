package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// RunnerConnect records a runner's connection at the database's clock,
// replacing the row of its (project, name) only when the same key holds
// it or the row was not seen within staleAfter (ErrConflict otherwise).
func (s *Store) RunnerConnect(ctx context.Context, row *store.RunnerRow, staleAfter time.Duration) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.RunnerRow(row); err != nil {
		return fmt.Errorf("record runner: %w", err)
	}
	if err := checks.StaleAfter(staleAfter); err != nil {
		return fmt.Errorf("record runner: %w", err)
	}
	// now() is the database's clock, the same for every node: the times
	// and the staleness bound come from it, never from the caller.
	var seen time.Time
	err := s.queryRow(ctx, func(r pgx.Row) error { return r.Scan(&seen) },
		`INSERT INTO runners (project, name, conn_id, key_id, node, labels, capacity, version, protocol, connected_at, seen_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $10, now(), now())
ON CONFLICT (project, name) DO UPDATE SET conn_id = excluded.conn_id, key_id = excluded.key_id, node = excluded.node,
  labels = excluded.labels, capacity = excluded.capacity, version = excluded.version, protocol = excluded.protocol,
  connected_at = excluded.connected_at, seen_at = excluded.seen_at, sessions = '{}'
WHERE runners.key_id = excluded.key_id OR runners.seen_at < now() - $9::bigint * interval '1 microsecond'
RETURNING seen_at`,
		row.Project, row.Name, row.ConnID, row.KeyID, row.Node, storeutil.NonNil(row.Labels), row.Capacity, row.Version,
		staleAfter.Microseconds(), row.Protocol)
	if errors.Is(err, store.ErrNotFound) { // no row: the WHERE refused the update
		return fmt.Errorf("record runner %s: held by another key: %w", row.Name, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("record runner %s: %w", row.Name, err)
	}
	row.ConnectedAt, row.SeenAt = seen.UTC(), seen.UTC()
	row.Sessions = []string{} // a new connection has none open
	return nil
}

// RunnerTouch records a sign of life of the connection connID, at the
// database's clock.
func (s *Store) RunnerTouch(ctx context.Context, project, name, connID string) error {
	if err := checks.RunnerKey(project, name, connID); err != nil {
		return fmt.Errorf("touch runner: %w", err)
	}
	n, err := s.exec(ctx, `UPDATE runners SET seen_at = greatest(seen_at, now()) WHERE project = $1 AND name = $2 AND conn_id = $3`,
		project, name, connID)
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

// RunnerList returns the runners of project ("": all) seen within
// staleAfter (0: all) of the database's clock.
func (s *Store) RunnerList(ctx context.Context, project string, staleAfter time.Duration) ([]*store.RunnerRow, error) {
	if err := checks.Text("project", project); err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	if err := checks.StaleAfter(staleAfter); err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	var out []*store.RunnerRow
	err := s.query(ctx, func(rows pgx.Rows) error {
		var r store.RunnerRow
		if err := rows.Scan(&r.Project, &r.Name, &r.ConnID, &r.KeyID, &r.Node, &r.Labels, &r.Capacity, &r.Version, &r.Protocol, &r.ConnectedAt, &r.SeenAt, &r.Sessions); err != nil {
			return err
		}
		r.Labels, r.Sessions = storeutil.NonNil(r.Labels), storeutil.NonNil(r.Sessions)
		r.ConnectedAt, r.SeenAt = r.ConnectedAt.UTC(), r.SeenAt.UTC()
		out = append(out, &r)
		return nil
	}, `SELECT project, name, conn_id, key_id, node, labels, capacity, version, protocol, connected_at, seen_at, sessions FROM runners
WHERE ($1 = '' OR project = $1) AND ($2::bigint = 0 OR seen_at >= now() - $2::bigint * interval '1 microsecond')
ORDER BY project, name`, project, staleAfter.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	return out, nil
}

// RunnerSessions implements store.Store.
func (s *Store) RunnerSessions(ctx context.Context, project, name, connID string, sessions []string) error {
	if err := checks.RunnerSessions(project, name, connID, sessions); err != nil {
		return fmt.Errorf("record runner sessions: %w", err)
	}
	n, err := s.exec(ctx, `UPDATE runners SET sessions = $4 WHERE project = $1 AND name = $2 AND conn_id = $3`,
		project, name, connID, storeutil.NonNil(sessions))
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record runner %s sessions: %w", name, err)
	}
	return nil
}
