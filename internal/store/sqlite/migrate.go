package sqlite

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded migrations/NNN_name.sql file.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded migrations in version order and checks
// that the versions run 1, 2, 3... without gaps or duplicates.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNN_name.sql", e.Name())
		}
		v, err := strconv.Atoi(prefix)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version number", e.Name())
		}
		body, err := fs.ReadFile(fsys, path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (versions must run 1, 2, 3... without gaps)", m.name, i+1)
		}
	}
	return ms, nil
}

// knownVersion is the newest schema version this driver can use.
func knownVersion() (int, error) {
	ms, err := loadMigrations(migrationFS)
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
	ms, err := loadMigrations(migrationFS)
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
func (w *writer) applyMigration(m migration, known int, s *Store) (err error) {
	// The writer's contexts are its own: a migration half applied because a
	// caller gave up would only be rolled back anyway.
	ctx := context.Background()
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin migration %d: %w", m.version, mapErr(err))
	}
	defer func() {
		if err != nil {
			if _, rbErr := w.conn.ExecContext(ctx, "ROLLBACK"); rbErr != nil && !isNoTransaction(rbErr) {
				w.log.Error("sqlite migration rollback failed", "version", m.version, "err", rbErr)
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
		return newerSchemaError(current, known)
	}
	if current >= m.version {
		_, err := w.conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := w.conn.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("apply migration %s: %w", m.name, err)
	}
	if _, err := w.conn.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.version, toMicros(s.cfg.Now())); err != nil {
		return fmt.Errorf("record migration %s: %w", m.name, err)
	}
	if _, err := w.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit migration %s: %w", m.name, err)
	}
	s.log.Info("sqlite migration applied", "version", m.version, "name", m.name, "path", s.path)
	return nil
}

func newerSchemaError(current, known int) error {
	return fmt.Errorf("database schema version %d is newer than this driver's schema version %d: upgrade longhaul", current, known)
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
