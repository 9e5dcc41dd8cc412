package e2e

import (
	"database/sql"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	// Registers the "sqlite" database/sql driver for openDataDB.
	_ "modernc.org/sqlite"
)

// openDataDB opens the SQLite database of srv's data directory for a test
// to read or change directly (what no API allows: a journal from before a
// field existed, a row another project owns). Its statements wait up to
// 30 s for the server's writer, as the server's own connections wait for
// each other: the server commits whenever its engine works (a runner's
// report, a lease renewal), and without a busy timeout SQLite refuses at
// once with "database is locked".
func openDataDB(t *testing.T, srv *server) *sql.DB {
	t.Helper()
	return openDataDBWith(t, srv, "busy_timeout(30000)")
}

// openDataDBWith is openDataDB with the connection's PRAGMAs.
func openDataDBWith(t *testing.T, srv *server, pragmas ...string) *sql.DB {
	t.Helper()
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(srv.dataDir, "longhaul.db")), RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
