package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// TestMigrateConcurrentNodes: nodes starting at once on an empty schema
// migrate it once, all of them successfully.
func TestMigrateConcurrentNodes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.FreshSchema(t)
	const nodes = 4
	stores := make([]*Store, nodes)
	for i := range stores {
		stores[i] = openDSN(t, dsn, &Config{MaxConns: 2})
	}
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "node %d", i)
	}
	known, err := knownVersion()
	require.NoError(t, err)
	var versions []int
	err = stores[0].query(t.Context(), func(rows pgx.Rows) error {
		var v int
		if err := rows.Scan(&v); err != nil {
			return err
		}
		versions = append(versions, v)
		return nil
	}, `SELECT version FROM schema_migrations ORDER BY version`)
	require.NoError(t, err)
	want := make([]int, known)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, versions, "each migration recorded once")
	for _, s := range stores {
		require.NoError(t, s.Ping(t.Context()))
	}
}

func TestSchemaNewerThanDriverRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.FreshSchema(t)
	s := openDSN(t, dsn, nil)
	require.NoError(t, s.Migrate(t.Context()))
	current, known, err := s.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, known, current)

	future := known + 5
	_, err = s.exec(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES ($1, 'from the future')`, future)
	require.NoError(t, err)
	err = s.Migrate(t.Context())
	require.ErrorContains(t, err, fmt.Sprintf("database schema version %d is newer than this driver's schema version %d", future, known))
	require.ErrorContains(t, s.Ping(t.Context()), strconv.Itoa(future), "a newer schema is not ready")

	// Another node says the same.
	other := openDSN(t, dsn, nil)
	require.ErrorContains(t, other.Migrate(t.Context()), "upgrade longhaul")
	current, _, err = other.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, future, current)
}

func TestUnmigratedIsNotReady(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	current, known, err := s.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, current)
	require.Positive(t, known)
	require.ErrorContains(t, s.Ping(t.Context()), "run migrations")
	require.NoError(t, s.Migrate(t.Context()))
	require.NoError(t, s.Ping(t.Context()))
}

// TestMigrateHoldsTheLock: while another session holds the schema's
// migration lock, Migrate waits (here: until its context ends).
func TestMigrateHoldsTheLock(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, migrateLockKey(s.schema))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Migrate(ctx) }()
	// Migrate is blocked on the lock: its backend waits for an advisory lock.
	key := uint64(migrateLockKey(s.schema))
	poll(t, "Migrate waits for the lock", func() bool {
		var waiting bool
		err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = $1 AND objid::bigint = $2)`,
			int64(key>>32), int64(key&0xffffffff)).Scan(&waiting)
		require.NoError(t, err)
		return waiting
	})
	cancel()
	require.Error(t, <-done)
	current, _, err := s.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, current, "nothing was applied without the lock")
	_, err = conn.Exec(t.Context(), `SELECT pg_advisory_unlock($1)`, migrateLockKey(s.schema))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
}

// TestLoadMigrations checks the embedded migrations: the same files, by
// name, as the SQLite driver's (a schema change is made on both); the
// numbering rules are storeutil's, tested there.
func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	sqlite, err := storeutil.LoadMigrations(os.DirFS("../sqlite"))
	require.NoError(t, err)
	names := func(ms []storeutil.Migration) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	require.Equal(t, names(sqlite), names(ms), "the same versions as the SQLite driver")
	require.Equal(t, 1, ms[0].Version)
}
