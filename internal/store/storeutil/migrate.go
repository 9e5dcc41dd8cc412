package storeutil

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one migrations/NNN_name.sql file of a driver's embedded
// schema. Each driver has its own SQL; the numbering rule is shared so that
// both drivers' schema versions mean the same thing.
type Migration struct {
	Version int
	Name    string // the file name, NNN_name.sql
	SQL     string
}

// LoadMigrations reads fsys's migrations/*.sql in version order and checks
// that the versions run 1, 2, 3... without gaps or duplicates.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
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
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (versions must run 1, 2, 3... without gaps)", m.Name, i+1)
		}
	}
	return ms, nil
}

// SchemaMismatch is Ping's verdict on a database at schema version current
// for a driver that knows version known: nil when they match; an older
// database needs its migrations run, a newer one a newer binary.
func SchemaMismatch(current, known int) error {
	switch {
	case current == known:
		return nil
	case current > known:
		return NewerSchemaError(current, known)
	default:
		return fmt.Errorf("database schema version %d, driver schema version %d: run migrations", current, known)
	}
}

// NewerSchemaError is the error for a database whose schema is newer than
// the running binary's driver.
func NewerSchemaError(current, known int) error {
	return fmt.Errorf("database schema version %d is newer than this driver's schema version %d: upgrade longhaul", current, known)
}
