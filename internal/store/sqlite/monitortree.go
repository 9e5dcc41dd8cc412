package sqlite

import (
	"context"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// MonitorTreeGet returns the tree's monitor record.
func (s *Store) MonitorTreeGet(ctx context.Context, rootID string) (*store.MonitorTreeRow, error) {
	if err := checks.ID("root_id", rootID); err != nil {
		return nil, fmt.Errorf("get monitor tree: %w", err)
	}
	row, err := s.queryRow(ctx, `SELECT state, version FROM monitor_trees WHERE root_id = ?`, rootID)
	if err != nil {
		return nil, fmt.Errorf("get monitor tree %s: %w", rootID, err)
	}
	r := store.MonitorTreeRow{RootID: rootID}
	if err := row.Scan(&r.State, &r.Version); err != nil {
		return nil, fmt.Errorf("get monitor tree %s: %w", rootID, s.readErr(err))
	}
	return &r, nil
}

// MonitorTreePut replaces the tree's monitor record under the write lock,
// if its version is still p.Version.
func (s *Store) MonitorTreePut(ctx context.Context, p *store.MonitorTreePutParams) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.ID("root_id", p.RootID); err != nil {
		return fmt.Errorf("put monitor tree: %w", err)
	}
	if p.Version < 0 {
		return fmt.Errorf("put monitor tree: version is negative")
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		q := `UPDATE monitor_trees SET state = ?, version = version + 1 WHERE root_id = ? AND version = ?`
		args := []any{p.State, p.RootID, p.Version}
		if p.Version == 0 {
			q = `INSERT INTO monitor_trees (root_id, state, version) VALUES (?, ?, 1) ON CONFLICT (root_id) DO NOTHING`
			args = []any{p.RootID, p.State}
		}
		res, err := w.exec(q, args...)
		if err != nil {
			return nil, mapErr(err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, mapErr(err)
		} else if n == 0 {
			return nil, store.ErrConflict
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("put monitor tree %s: %w", p.RootID, err)
	}
	return nil
}
