package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storetest"
)

// testDSNEnv names the test database; testDSNEnvAlt is the name the issue
// uses, accepted too.
const (
	testDSNEnv    = "LONGHAUL_TEST_POSTGRES"
	testDSNEnvAlt = "LONGHAUL_TEST_POSTGRES_URL"
)

// baseDSN returns the test database's connection string. Without one the
// test skips on a developer's machine, and fails under CI=true, where
// PostgreSQL is required (.ci/run starts it).
func baseDSN(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{testDSNEnv, testDSNEnvAlt} {
		if dsn := os.Getenv(name); dsn != "" {
			return dsn
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s is not set: CI requires PostgreSQL for the PostgreSQL driver's tests (.ci/run starts a throwaway cluster)", testDSNEnv)
	}
	tb.Skipf("%s is not set: skipping the PostgreSQL driver's tests; set it to a connection string "+
		"(e.g. postgres://postgres@127.0.0.1:5432/longhaul_test?sslmode=disable) to run them", testDSNEnv)
	return ""
}

// withParam returns dsn with a run-time parameter set, in URL or key=value
// form as dsn is.
func withParam(tb testing.TB, dsn, key, value string) string {
	tb.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		require.NoError(tb, err, "parse %s", testDSNEnv)
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value) + "'"
}

// adminExec runs statements on the test database outside any test schema.
func adminExec(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, baseDSN(tb))
	require.NoError(tb, err, "connect to the test database")
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(tb, err, "%s", sql)
}

// freshSchema creates an empty schema for one test, dropped when the test
// ends (after the stores the test opened on it are closed), and returns a
// connection string whose search_path is that schema.
func freshSchema(tb testing.TB) string {
	tb.Helper()
	dsn := baseDSN(tb)
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(tb, err)
	schema := "longhaul_test_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{schema}.Sanitize()
	adminExec(tb, "CREATE SCHEMA "+ident)
	tb.Cleanup(func() { adminExec(tb, "DROP SCHEMA "+ident+" CASCADE") })
	return withParam(tb, dsn, "search_path", schema)
}

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
	return openDSN(tb, freshSchema(tb), cfg)
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
	baseDSN(t)
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
