package sqlite

import (
	"context"
	"embed"
	"fmt"

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

const (
	createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER NOT NULL PRIMARY KEY,
    applied_at INTEGER NOT NULL
) STRICT`
	migrationsTableExists = `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`
	currentVersionQuery   = `SELECT coalesce(max(version), 0) FROM schema_migrations`
)

// Migrate applies the embedded migrations that the database lacks, in order,
// each in its own transaction together with its schema_migrations row. It is
// safe to run again (and concurrently from several processes: each step
// re-reads the version under the write lock). It refuses a database whose
// schema is newer than the driver.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	ms, err := storeutil.LoadMigrations(migrationFS)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = s.w.do(ctx, &request{raw: func(w *writer) error {
		for _, m := range ms {
			if err := w.applyMigration(m, len(ms), s); err != nil {
				return err
			}
		}
		return nil
	}})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// applyMigration applies m unless the database already has it.
func (w *writer) applyMigration(m storeutil.Migration, known int, s *Store) (err error) {
	// The writer's contexts are its own: a migration half applied because a
	// caller gave up would only be rolled back anyway.
	ctx := context.Background()
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin migration %d: %w", m.Version, mapErr(err))
	}
	defer func() {
		if err != nil {
			if _, rbErr := w.conn.ExecContext(ctx, "ROLLBACK"); rbErr != nil && !isNoTransaction(rbErr) {
				w.log.Error("sqlite migration rollback failed", "version", m.Version, "err", rbErr)
			}
		}
	}()
	if _, err := w.conn.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := w.conn.QueryRowContext(ctx, currentVersionQuery).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > known {
		return storeutil.NewerSchemaError(current, known)
	}
	if current >= m.Version {
		_, err := w.conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := w.conn.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("apply migration %s: %w", m.Name, err)
	}
	if _, err := w.conn.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.Version, toMicros(s.cfg.Now())); err != nil {
		return fmt.Errorf("record migration %s: %w", m.Name, err)
	}
	if _, err := w.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit migration %s: %w", m.Name, err)
	}
	s.log.Info("sqlite migration applied", "version", m.Version, "name", m.Name, "path", s.path)
	return nil
}

// SchemaVersion returns the database's schema version (0 before the first
// migration) and the newest version this driver knows. A database whose
// version is below known needs Migrate; above known, this binary is too old
// for it.
func (s *Store) SchemaVersion(ctx context.Context) (current, known int, err error) {
	if err := s.checkOpen(); err != nil {
		return 0, 0, err
	}
	known, err = knownVersion()
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", err)
	}
	// One read transaction so the table cannot appear between the two reads.
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", s.readErr(err))
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx, migrationsTableExists).Scan(&n); err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", s.readErr(err))
	}
	if n == 0 {
		return 0, known, nil
	}
	if err := tx.QueryRowContext(ctx, currentVersionQuery).Scan(&current); err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", s.readErr(err))
	}
	return current, known, nil
}
