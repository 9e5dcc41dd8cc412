package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	"github.com/longhaul-dev/longhaul/internal/store/storetest"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// openDSN opens a store on dsn, closed at cleanup.
func openDSN(tb testing.TB, dsn string, cfg *Config) *Store {
	tb.Helper()
	if cfg == nil {
		// Small pools: the conformance suite opens a store per subtest.
		cfg = &Config{MaxConns: 4}
	}
	s, err := Open(context.Background(), dsn, cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	return s
}

// openTest opens a store on a fresh schema.
func openTest(tb testing.TB, cfg *Config) *Store {
	tb.Helper()
	return openDSN(tb, pgtest.FreshSchema(tb), cfg)
}

// openMigrated opens a migrated store on a fresh schema.
func openMigrated(tb testing.TB, cfg *Config) *Store {
	tb.Helper()
	s := openTest(tb, cfg)
	require.NoError(tb, s.Migrate(context.Background()))
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	pgtest.BaseDSN(t)
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t, nil) })
}

var testTime = time.Date(2025, 6, 7, 8, 9, 10, 654321000, time.UTC)

func createSession(tb testing.TB, s *Store, id string, runnable bool) {
	tb.Helper()
	_, err := s.SessionCreate(context.Background(), &store.SessionCreateParams{
		Session: store.SessionRow{
			ID: id, AgentName: "agent", AgentVersion: 1, Status: "queued", Runnable: runnable,
			CreatedAt: testTime, UpdatedAt: testTime,
		},
		Events: []store.NewEvent{{Type: "session.created", Time: testTime, Data: json.RawMessage(`{}`)}},
	})
	require.NoError(tb, err)
}

func appendParams(id string, expected int64, n int) *store.EventAppendParams {
	p := &store.EventAppendParams{
		SessionID: id, ExpectedSeq: expected, Status: "running",
		State: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, expected+int64(n))), UpdatedAt: testTime,
	}
	for i := range n {
		p.Events = append(p.Events, store.NewEvent{
			Type: "test.event", Time: testTime, Data: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`),
		})
	}
	return p
}

// poll calls cond until it holds or the deadline passes.
func poll(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(tb, "timed out waiting", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openBefore opens a store on a fresh schema migrated up to migration, not
// included, and a connection to write its rows with (released at the
// test's end).
func openBefore(t *testing.T, migration string) (*Store, *pgxpool.Conn) {
	t.Helper()
	s := openTest(t, nil)
	ctx := t.Context()
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	at := slices.IndexFunc(ms, func(m storeutil.Migration) bool { return m.Name == migration })
	require.Positive(t, at, "no migration %s", migration)
	conn, err := s.pool.Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(conn.Release) // before the store's close: a held connection would stall it
	_, err = conn.Exec(ctx, createMigrationsTable)
	require.NoError(t, err)
	for _, m := range ms[:at] {
		require.NoError(t, s.applyMigration(ctx, conn, m))
	}
	return s, conn
}
