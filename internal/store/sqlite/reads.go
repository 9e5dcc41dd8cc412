package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// Reads run on the read-only pool with statements prepared once per query.

// readErr maps a read error, reporting store.ErrClosed for anything that
// failed because Close ran concurrently.
func (s *Store) readErr(err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() {
		return fmt.Errorf("%w: %w", store.ErrClosed, err)
	}
	return mapErr(err)
}

// queryRow runs a single-row read. Scan errors still need readErr.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) (*sql.Row, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	st, err := s.rstmts.get(ctx, query)
	if err != nil {
		return nil, s.readErr(err)
	}
	return st.QueryRowContext(ctx, args...), nil
}

// query runs a multi-row read and calls scan for each row.
func (s *Store) query(ctx context.Context, scan func(*sql.Rows) error, query string, args ...any) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	st, err := s.rstmts.get(ctx, query)
	if err != nil {
		return s.readErr(err)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return s.readErr(err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return s.readErr(err)
		}
	}
	return s.readErr(rows.Err())
}

// sessionExists tells an empty list of a session's rows from an unknown
// session (store.ErrNotFound).
func (s *Store) sessionExists(ctx context.Context, id string) error {
	row, err := s.queryRow(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id)
	if err != nil {
		return err
	}
	var one int
	if err := row.Scan(&one); err != nil {
		return fmt.Errorf("session %s: %w", id, s.readErr(err))
	}
	return nil
}
