package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
)

// Layout of a data directory.
const (
	// DBFile is the SQLite database (when the node runs on SQLite).
	DBFile = "longhaul.db"
	// WorkspacesDir holds one workspace per session.
	WorkspacesDir = "workspaces"
	// NodeIDFile holds the node's id.
	NodeIDFile = "node-id"
	// LockFile is locked while a process uses the directory.
	LockFile = "lock"
	// RuntimeDir holds the sockets of the sessions' egress proxies.
	RuntimeDir = "run"
)

// IsPostgresURL reports whether s selects the PostgreSQL store.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// StoreChoice is which store to open: PostgreSQL when URL is set, else
// SQLite in DataDir.
type StoreChoice struct {
	URL     string
	DataDir string
}

// Driver is a storage driver as a node uses it: the store and its schema
// version. Both drivers satisfy it.
type Driver interface {
	store.Store
	// SchemaVersion returns the schema's version and the newest this
	// binary knows.
	SchemaVersion(ctx context.Context) (current, known int, err error)
}

var (
	_ Driver = (*sqlite.Store)(nil)
	_ Driver = (*postgres.Store)(nil)
)

// Store is an open store and how to name it to a person.
type Store struct {
	Driver
	// Kind is "SQLite" or "PostgreSQL"; Target is the database file, or
	// user@host:port/database and schema: never a password.
	Kind, Target string
}

// String names the store, e.g. "SQLite /var/lib/longhaul/longhaul.db".
func (s *Store) String() string { return s.Kind + " " + s.Target }

// OpenStore opens the chosen store without migrating it. For SQLite,
// create says whether a missing database may be created (a node, migrate)
// or is an error (a command that reads one). An error dialing PostgreSQL is
// returned as the driver gave it (it names the database, never the
// password), so a caller can recognise it and add its own hint.
func OpenStore(ctx context.Context, ch StoreChoice, log *slog.Logger, create bool) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ch.URL != "" {
		if !IsPostgresURL(ch.URL) {
			// The URL is not echoed: it may hold a password.
			return nil, errors.New("the store URL must be a postgres:// or postgresql:// URL")
		}
		st, err := postgres.Open(ctx, ch.URL, &postgres.Config{Logger: log})
		if err != nil {
			return nil, err
		}
		return &Store{Driver: st, Kind: "PostgreSQL", Target: st.Target()}, nil
	}
	if ch.DataDir == "" {
		return nil, errors.New("the data directory is not set")
	}
	dir, err := filepath.Abs(ch.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %q: %w", ch.DataDir, err)
	}
	path := filepath.Join(dir, DBFile)
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	} else if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no Longhaul database at %s: give the data directory of one with --data, or a PostgreSQL URL with --store", path)
	}
	st, err := sqlite.Open(ctx, path, &sqlite.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	return &Store{Driver: st, Kind: "SQLite", Target: st.Path()}, nil
}

// CheckSchema is the one place that decides whether this binary may use a
// store's schema. A schema newer than the binary is always refused (a newer
// node or `longhaul migrate` moved it on: this binary does not know its
// tables). An older one is migrated when migrate is set, else refused with
// the command that migrates it.
func CheckSchema(ctx context.Context, s *Store, migrate bool) error {
	current, known, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("read the schema version of %s: %w", s, err)
	}
	switch {
	case current > known:
		return fmt.Errorf("the schema of %s is at version %d, newer than this longhaul's schema version %d: "+
			"a newer longhaul migrated it; run a longhaul of that version or newer", s, current, known)
	case current == known:
		return nil
	case !migrate:
		return fmt.Errorf("the schema of %s is at version %d, older than this longhaul's schema version %d: "+
			"run `longhaul migrate` first", s, current, known)
	}
	if err := s.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", s, err)
	}
	return nil
}
