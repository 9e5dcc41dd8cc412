package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Env names the test database's connection string; EnvAlt is the name the
// issue uses, accepted too.
const (
	Env    = "LONGHAUL_TEST_POSTGRES"
	EnvAlt = "LONGHAUL_TEST_POSTGRES_URL"
)

// BaseDSN returns the test database's connection string. Without one the
// test skips, or fails under CI=true.
func BaseDSN(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{Env, EnvAlt} {
		if dsn := os.Getenv(name); dsn != "" {
			return dsn
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s is not set: CI requires PostgreSQL for these tests (.ci/run starts a throwaway cluster)", Env)
	}
	tb.Skipf("%s is not set: skipping a PostgreSQL test; set it to a connection string "+
		"(e.g. postgres://postgres@127.0.0.1:5432/longhaul_test?sslmode=disable) to run it", Env)
	return ""
}

// WithParam returns dsn with a run-time parameter set, in URL or key=value
// form as dsn is.
func WithParam(tb testing.TB, dsn, key, value string) string {
	tb.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		require.NoError(tb, err, "parse %s", Env)
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value) + "'"
}

// Exec runs a statement on the test database outside any test schema.
func Exec(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, BaseDSN(tb))
	require.NoError(tb, err, "connect to the test database")
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(tb, err, "%s", sql)
}

// FreshSchema creates an empty schema for one test, dropped when the test
// ends, and returns a connection string whose search_path is that schema.
// Register the cleanups of the stores opened on it after calling it (as
// t.Cleanup runs last-registered first), so they close before the drop.
func FreshSchema(tb testing.TB) string {
	tb.Helper()
	dsn := BaseDSN(tb)
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	schema := "longhaul_test_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{schema}.Sanitize()
	Exec(tb, "CREATE SCHEMA "+ident)
	tb.Cleanup(func() { Exec(tb, "DROP SCHEMA "+ident+" CASCADE") })
	return WithParam(tb, dsn, "search_path", schema)
}
