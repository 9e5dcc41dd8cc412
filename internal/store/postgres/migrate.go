package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// knownVersion is the newest schema version this driver can use.
func knownVersion() (int, error) {
	ms, err := storeutil.LoadMigrations(migrationFS)
	if err != nil {
		return 0, err
	}
	return len(ms), nil
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER     NOT NULL PRIMARY KEY,
    name       TEXT        NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`

// migrateLockKey is the advisory lock that serialises Migrate across the
// nodes sharing a schema (advisory locks are per database, so the schema is
// part of the key).
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("longhaul migrate\x00" + schema))
	return int64(h.Sum64())
}

// Migrate applies the embedded migrations that the schema lacks, in order,
// each in its own transaction together with its schema_migrations row,
// holding an advisory lock for the schema so that nodes starting together
// migrate once (the others wait, then find nothing to do). It is safe to run
// again. It refuses a schema newer than the driver.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	ms, err := storeutil.LoadMigrations(migrationFS)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", s.mapErr(err))
	}
	key := migrateLockKey(s.schema)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		conn.Release()
		return fmt.Errorf("migrate: lock: %w", s.mapErr(err))
	}
	defer s.unlock(ctx, conn, key)
	if _, err := conn.Exec(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", s.mapErr(err))
	}
	var current int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("migrate: read schema version: %w", s.mapErr(err))
	}
	if current > len(ms) {
		return fmt.Errorf("migrate: %w", storeutil.NewerSchemaError(current, len(ms)))
	}
	for _, m := range ms[current:] {
		if err := s.applyMigration(ctx, conn, m); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, conn *pgxpool.Conn, m storeutil.Migration) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Without arguments Exec uses the simple protocol, which runs a
		// file of several statements (in this transaction).
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("record migration %s: %w", m.Name, err)
		}
		return nil
	})
	if err != nil {
		return s.mapErr(err)
	}
	s.log.Info("postgres migration applied", "version", m.Version, "name", m.Name, "target", s.target)
	return nil
}

// unlock releases the advisory lock and the connection. A connection whose
// unlock failed is closed instead of going back to the pool, which releases
// the lock with the session.
func (s *Store) unlock(ctx context.Context, conn *pgxpool.Conn, key int64) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		s.log.Warn("postgres migration unlock failed; closing the connection", "err", err)
		_ = conn.Conn().Close(uctx)
	}
	conn.Release()
}

// SchemaVersion returns the schema's version (0 before the first migration)
// and the newest version this driver knows. A schema whose version is below
// known needs Migrate; above known, this binary is too old for it.
func (s *Store) SchemaVersion(ctx context.Context) (current, known int, err error) {
	if err := s.checkOpen(); err != nil {
		return 0, 0, err
	}
	known, err = knownVersion()
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", err)
	}
	// to_regclass resolves the name through the search_path, as the
	// driver's statements do, and is NULL when there is no such table (a
	// statement naming a missing table would fail instead).
	var exists bool
	err = s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&exists) },
		`SELECT to_regclass('schema_migrations') IS NOT NULL`)
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", err)
	}
	if !exists {
		return 0, known, nil
	}
	err = s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&current) },
		`SELECT coalesce(max(version), 0) FROM schema_migrations`)
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", err)
	}
	return current, known, nil
}
