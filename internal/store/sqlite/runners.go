package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// RunnerConnect records a runner's connection at the store's clock
// (Options.Now), replacing the row of its (project, name) only when the
// same key holds it or the row was not seen within staleAfter
// (ErrConflict otherwise).
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
	labels, err := json.Marshal(storeutil.NonNil(row.Labels))
	if err != nil {
		return fmt.Errorf("record runner %s: encode labels: %w", row.Name, err)
	}
	var now time.Time
	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		// The store's clock, read in the writer so that the times and the
		// staleness bound are one instant, never the caller's.
		now = fromMicros(toMicros(s.cfg.Now()))
		n, err := w.changed(`INSERT INTO runners (project, name, conn_id, key_id, node, labels, capacity, version, protocol, connected_at, seen_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (project, name) DO UPDATE SET conn_id = excluded.conn_id, key_id = excluded.key_id, node = excluded.node,
  labels = excluded.labels, capacity = excluded.capacity, version = excluded.version, protocol = excluded.protocol,
  connected_at = excluded.connected_at, seen_at = excluded.seen_at, sessions = '[]'
WHERE runners.key_id = excluded.key_id OR runners.seen_at < ?`,
			row.Project, row.Name, row.ConnID, row.KeyID, row.Node, string(labels), row.Capacity, row.Version, row.Protocol,
			toMicros(now), toMicros(now), toMicros(now.Add(-staleAfter)))
		if err != nil {
			return nil, mapErr(err)
		}
		if n == 0 {
			return nil, store.ErrConflict
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("record runner %s: %w", row.Name, err)
	}
	row.ConnectedAt, row.SeenAt = now, now
	row.Sessions = []string{} // a new connection has none open
	return nil
}

// RunnerTouch records a sign of life of the connection connID, at the
// store's clock.
func (s *Store) RunnerTouch(ctx context.Context, project, name, connID string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.RunnerKey(project, name, connID); err != nil {
		return fmt.Errorf("touch runner: %w", err)
	}
	if err := s.updateHeld(ctx, `UPDATE runners SET seen_at = max(seen_at, ?) WHERE project = ? AND name = ? AND conn_id = ?`,
		toMicros(s.cfg.Now()), project, name, connID); err != nil {
		return fmt.Errorf("touch runner %s: %w", name, err)
	}
	return nil
}

// updateHeld runs query, an update of the row a connection holds:
// store.ErrNotFound when it changed no row (the connection holds it no
// more).
func (s *Store) updateHeld(ctx context.Context, query string, args ...any) error {
	return s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		n, err := w.changed(query, args...)
		if err != nil {
			return nil, mapErr(err)
		}
		if n == 0 {
			return nil, store.ErrNotFound
		}
		return nil, nil
	}})
}

// RunnerDisconnect deletes the row of (project, name) if connID holds it.
func (s *Store) RunnerDisconnect(ctx context.Context, project, name, connID string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.RunnerKey(project, name, connID); err != nil {
		return fmt.Errorf("remove runner: %w", err)
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		_, err := w.exec(`DELETE FROM runners WHERE project = ? AND name = ? AND conn_id = ?`, project, name, connID)
		return nil, mapErr(err)
	}})
	if err != nil {
		return fmt.Errorf("remove runner %s: %w", name, err)
	}
	return nil
}

// RunnerList returns the runners of project ("": all) seen within
// staleAfter (0: all) of the store's clock.
func (s *Store) RunnerList(ctx context.Context, project string, staleAfter time.Duration) ([]*store.RunnerRow, error) {
	if err := checks.Text("project", project); err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	if err := checks.StaleAfter(staleAfter); err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	var seenSince int64 // 0: every row
	if staleAfter > 0 {
		seenSince = toMicros(s.cfg.Now().Add(-staleAfter))
	}
	var out []*store.RunnerRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		var (
			r                store.RunnerRow
			labels, sessions string
			connected, seen  int64
		)
		if err := rows.Scan(&r.Project, &r.Name, &r.ConnID, &r.KeyID, &r.Node, &labels, &r.Capacity, &r.Version, &r.Protocol, &connected, &seen, &sessions); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			return fmt.Errorf("runner %s: stored labels: %w", r.Name, err)
		}
		if err := json.Unmarshal([]byte(sessions), &r.Sessions); err != nil {
			return fmt.Errorf("runner %s: stored sessions: %w", r.Name, err)
		}
		r.Labels, r.Sessions = storeutil.NonNil(r.Labels), storeutil.NonNil(r.Sessions)
		r.ConnectedAt, r.SeenAt = fromMicros(connected), fromMicros(seen)
		out = append(out, &r)
		return nil
	}, `SELECT project, name, conn_id, key_id, node, labels, capacity, version, protocol, connected_at, seen_at, sessions FROM runners
WHERE (? = '' OR project = ?) AND seen_at >= ? ORDER BY project, name`, project, project, seenSince)
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	return out, nil
}

// RunnerSessions implements store.Store.
func (s *Store) RunnerSessions(ctx context.Context, project, name, connID string, sessions []string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.RunnerSessions(project, name, connID, sessions); err != nil {
		return fmt.Errorf("record runner sessions: %w", err)
	}
	enc, err := json.Marshal(storeutil.NonNil(sessions))
	if err != nil {
		return fmt.Errorf("record runner %s sessions: %w", name, err)
	}
	err = s.updateHeld(ctx, `UPDATE runners SET sessions = ? WHERE project = ? AND name = ? AND conn_id = ?`, string(enc), project, name, connID)
	if err != nil {
		return fmt.Errorf("record runner %s sessions: %w", name, err)
	}
	return nil
}
