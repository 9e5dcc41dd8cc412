package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// NodeAnnounce records (or replaces) a node's API addresses.
func (s *Store) NodeAnnounce(ctx context.Context, row *store.NodeRow) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.NodeRow(row); err != nil {
		return fmt.Errorf("announce node: %w", err)
	}
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		t.queue(`INSERT INTO nodes (id, addrs, announced_at) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET addrs = excluded.addrs, announced_at = excluded.announced_at`,
			row.ID, storeutil.NonNil(row.Addrs), row.AnnouncedAt)
		return nil
	})
	if err != nil {
		return fmt.Errorf("announce node %s: %w", row.ID, err)
	}
	return nil
}

// NodeList returns every node's announced addresses, by node id.
func (s *Store) NodeList(ctx context.Context) ([]*store.NodeRow, error) {
	var out []*store.NodeRow
	err := s.query(ctx, func(rows pgx.Rows) error {
		var r store.NodeRow
		if err := rows.Scan(&r.ID, &r.Addrs, &r.AnnouncedAt); err != nil {
			return err
		}
		r.Addrs = storeutil.NonNil(r.Addrs)
		r.AnnouncedAt = r.AnnouncedAt.UTC()
		out = append(out, &r)
		return nil
	}, `SELECT id, addrs, announced_at FROM nodes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}
