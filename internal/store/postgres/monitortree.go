package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// MonitorTreeGet returns the tree's monitor record.
func (s *Store) MonitorTreeGet(ctx context.Context, rootID string) (*store.MonitorTreeRow, error) {
	if err := checks.ID("root_id", rootID); err != nil {
		return nil, fmt.Errorf("get monitor tree: %w", err)
	}
	r := store.MonitorTreeRow{RootID: rootID}
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&r.State, &r.Version) },
		`SELECT state, version FROM monitor_trees WHERE root_id = $1`, rootID)
	if err != nil {
		return nil, fmt.Errorf("get monitor tree %s: %w", rootID, err)
	}
	return &r, nil
}

// MonitorTreePut replaces the tree's monitor record if its version is
// still p.Version: one statement, whose row lock orders the writers of
// every node.
func (s *Store) MonitorTreePut(ctx context.Context, p *store.MonitorTreePutParams) error {
	if err := checks.ID("root_id", p.RootID); err != nil {
		return fmt.Errorf("put monitor tree: %w", err)
	}
	if p.Version < 0 {
		return fmt.Errorf("put monitor tree: version is negative")
	}
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		var n int64
		count := func(ct pgconn.CommandTag) error { n = ct.RowsAffected(); return nil }
		if p.Version == 0 {
			t.queue(`INSERT INTO monitor_trees (root_id, state, version) VALUES ($1, $2, 1) ON CONFLICT (root_id) DO NOTHING`,
				p.RootID, p.State).Exec(count)
		} else {
			t.queue(`UPDATE monitor_trees SET state = $2, version = version + 1 WHERE root_id = $1 AND version = $3`,
				p.RootID, p.State, p.Version).Exec(count)
		}
		if err := t.flush(ctx); err != nil {
			return err
		}
		if n == 0 {
			return store.ErrConflict
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put monitor tree %s: %w", p.RootID, err)
	}
	return nil
}
