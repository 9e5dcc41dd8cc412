package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

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
	addrs, err := json.Marshal(storeutil.NonNil(row.Addrs))
	if err != nil {
		return fmt.Errorf("announce node %s: encode addrs: %w", row.ID, err)
	}
	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		_, err := w.exec(`INSERT INTO nodes (id, addrs, announced_at) VALUES (?, ?, ?)
ON CONFLICT (id) DO UPDATE SET addrs = excluded.addrs, announced_at = excluded.announced_at`,
			row.ID, string(addrs), toMicros(row.AnnouncedAt))
		return nil, mapErr(err)
	}})
	if err != nil {
		return fmt.Errorf("announce node %s: %w", row.ID, err)
	}
	return nil
}

// NodeList returns every node's announced addresses, by node id.
func (s *Store) NodeList(ctx context.Context) ([]*store.NodeRow, error) {
	var out []*store.NodeRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		var (
			r     store.NodeRow
			addrs string
			at    int64
		)
		if err := rows.Scan(&r.ID, &addrs, &at); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(addrs), &r.Addrs); err != nil {
			return fmt.Errorf("node %s: stored addrs: %w", r.ID, err)
		}
		r.Addrs = storeutil.NonNil(r.Addrs)
		r.AnnouncedAt = fromMicros(at)
		out = append(out, &r)
		return nil
	}, `SELECT id, addrs, announced_at FROM nodes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}
