package tool_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// makeDB creates a database at ws/rel with a users table of n rows.
func makeDB(t *testing.T, ws, rel string, n int) {
	t.Helper()
	p := filepath.Join(ws, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: p}).EscapedPath())
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, avatar BLOB)`)
	require.NoError(t, err)
	tx, err := db.Begin()
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		_, err := tx.Exec(`INSERT INTO users (id, name, score, avatar) VALUES (?, ?, ?, ?)`,
			i, fmt.Sprintf("user%03d", i), float64(i)/2, []byte{byte(i), 0xff})
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
}

// query runs sqlite_query with args and returns the result and its JSON.
func query(t *testing.T, ws string, args map[string]any) (*tool.Result, string) {
	t.Helper()
	res := run(t, &tool.SQLiteQuery{}, ws, args)
	if res.Output == nil {
		return res, ""
	}
	out, err := json.Marshal(res.Output)
	require.NoError(t, err)
	return res, string(out)
}

func fileSHA(t *testing.T, p string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	return sha256.Sum256(data)
}

func TestSQLiteQuerySelectWithParams(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	makeDB(t, ws, "data/app.db", 20)

	res, out := query(t, ws, map[string]any{
		"database": "data/app.db",
		"sql":      "SELECT id, name, score, avatar FROM users WHERE score >= ? AND name LIKE ? ORDER BY id",
		"params":   []any{9, "user01%"},
	})
	require.Empty(t, res.Error)
	require.JSONEq(t, `{
		"columns": ["id", "name", "score", "avatar"],
		"rows": [
			[18, "user018", 9, {"base64": "Ev8=", "bytes": 2}],
			[19, "user019", 9.5, {"base64": "E/8=", "bytes": 2}]
		],
		"row_count": 2,
		"truncated": false
	}`, out)

	// Every kind of value and of parameter.
	res, out = query(t, ws, map[string]any{
		"database": "data/app.db",
		"sql":      "SELECT NULL, 1e999, -1e999, 2.5, 'é', ? = x'00ff', ?, ?, ?, length(?), printf('%.*c', 20000, 'x') AS long",
		"params":   []any{map[string]any{"base64": "AP8="}, true, nil, 12345678901, "text"},
	})
	require.Empty(t, res.Error)
	long := strings.Repeat("x", 16<<10)
	require.JSONEq(t, `{
		"columns": ["NULL", "1e999", "-1e999", "2.5", "'é'", "? = x'00ff'", "?", "?", "?", "length(?)", "long"],
		"rows": [[null, "Infinity", "-Infinity", 2.5, "é", 1, 1, null, 12345678901, 4,
			{"text": "`+long+`", "bytes": 20000, "truncated": true}]],
		"row_count": 1,
		"truncated": false
	}`, out)

	// Schema and pragmas that read are allowed.
	res, out = query(t, ws, map[string]any{"database": "data/app.db", "sql": "SELECT name FROM sqlite_master WHERE type = 'table'"})
	require.Empty(t, res.Error)
	require.Contains(t, out, `[["users"]]`)
	res, out = query(t, ws, map[string]any{"database": "data/app.db", "sql": "PRAGMA table_info(users)"})
	require.Empty(t, res.Error)
	require.Contains(t, out, `"avatar","BLOB"`)
	res, _ = query(t, ws, map[string]any{"database": "data/app.db", "sql": "SELECT * FROM pragma_index_list('users')"})
	require.Empty(t, res.Error)
	res, _ = query(t, ws, map[string]any{"database": "data/app.db", "sql": "PRAGMA user_version"})
	require.Empty(t, res.Error)

	// Too few parameters is the model's error to read.
	res, _ = query(t, ws, map[string]any{"database": "data/app.db", "sql": "SELECT ?, ?", "params": []any{1}})
	require.Contains(t, res.Error, "missing argument with index 2")
}

func TestSQLiteQueryLimits(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	makeDB(t, ws, "app.db", 250)

	res, _ := query(t, ws, map[string]any{"database": "app.db", "sql": "SELECT id FROM users ORDER BY id"})
	require.Empty(t, res.Error)
	out := res.Output.(*tool.SQLiteQueryOutput)
	require.Equal(t, tool.DefaultSQLiteRows, out.RowCount)
	require.Len(t, out.Rows, tool.DefaultSQLiteRows)
	require.True(t, out.Truncated)
	require.Equal(t, "max_rows", out.TruncatedBy)

	res, _ = query(t, ws, map[string]any{"database": "app.db", "sql": "SELECT id FROM users ORDER BY id LIMIT 7", "max_rows": 7})
	out = res.Output.(*tool.SQLiteQueryOutput)
	require.Equal(t, 7, out.RowCount)
	require.False(t, out.Truncated, "exactly max_rows rows, none left")

	res, _ = query(t, ws, map[string]any{"database": "app.db", "sql": "SELECT id FROM users", "max_rows": 1000})
	out = res.Output.(*tool.SQLiteQueryOutput)
	require.Equal(t, 250, out.RowCount)
	require.False(t, out.Truncated)

	res, _ = query(t, ws, map[string]any{"database": "app.db", "sql": "SELECT 1", "max_rows": 1001})
	require.Equal(t, "arguments.max_rows: must be <= 1000", res.Error)
	res, _ = query(t, ws, map[string]any{"database": "app.db", "sql": "SELECT 1", "max_rows": 0})
	require.Equal(t, "arguments.max_rows: must be >= 1", res.Error)
	res, _ = query(t, ws, map[string]any{"database": "app.db", "sql": "SELECT 1", "params": []any{[]any{1}}})
	require.Contains(t, res.Error, "arguments.params[0]")

	// The byte budget: 1000 rows of 1 KiB do not fit in 256 KiB.
	res, outJSON := query(t, ws, map[string]any{
		"database": "app.db", "sql": "SELECT printf('%.*c', 1000, 'y') FROM users, (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4)",
		"max_rows": 1000,
	})
	require.Empty(t, res.Error)
	out = res.Output.(*tool.SQLiteQueryOutput)
	require.True(t, out.Truncated)
	require.Equal(t, "bytes", out.TruncatedBy)
	require.Greater(t, out.RowCount, 200)
	require.Less(t, out.RowCount, 262)
	require.LessOrEqual(t, len(outJSON), tool.DefaultSQLiteOutputBytes)

	// The call's output bound is lower still.
	raw, err := json.Marshal(map[string]any{"database": "app.db", "sql": "SELECT name FROM users"})
	require.NoError(t, err)
	r, err := (&tool.SQLiteQuery{}).Run(context.Background(), &tool.Call{Workspace: ws, Arguments: raw, MaxOutputBytes: 300})
	require.NoError(t, err)
	out = r.Output.(*tool.SQLiteQueryOutput)
	require.Equal(t, "bytes", out.TruncatedBy)
	enc, err := json.Marshal(out)
	require.NoError(t, err)
	require.LessOrEqual(t, len(enc), 300)
}

func TestSQLiteQueryRefusesWrites(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	makeDB(t, ws, "app.db", 3)
	dbPath := filepath.Join(ws, "app.db")
	before := fileSHA(t, dbPath)
	outside := filepath.Join(t.TempDir(), "attached.db")

	for _, stmt := range []string{
		"INSERT INTO users (id, name) VALUES (100, 'x')",
		"UPDATE users SET name = 'x'",
		"DELETE FROM users",
		"DROP TABLE users",
		"CREATE TABLE t (x)",
		"CREATE TEMP TABLE t (x)",
		"CREATE INDEX i ON users (name)",
		"ALTER TABLE users ADD COLUMN x",
		"REPLACE INTO users (id, name) VALUES (1, 'x')",
		"BEGIN",
		"PRAGMA query_only = 0",
		"PRAGMA user_version = 5",
		"PRAGMA journal_mode = DELETE",
		"ATTACH DATABASE 'file:" + outside + "?mode=rwc' AS x",
		"ATTACH DATABASE 'other.db' AS x",
		"VACUUM",
		"VACUUM INTO 'copy.db'",
		"SELECT load_extension('libx')",
		"WITH x AS (SELECT 1) INSERT INTO users (id, name) SELECT 100, 'x' FROM x",
	} {
		res, _ := query(t, ws, map[string]any{"database": "app.db", "sql": stmt})
		require.NotEmpty(t, res.Error, stmt)
		require.Nil(t, res.Output, stmt)
	}
	res, _ := query(t, ws, map[string]any{"database": "app.db", "sql": "DELETE FROM users"})
	require.Contains(t, res.Error, "read-only")

	require.Equal(t, before, fileSHA(t, dbPath), "the database is unchanged")
	entries, err := os.ReadDir(ws)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no file was created in the workspace")
	require.NoFileExists(t, outside)

	res, _ = query(t, ws, map[string]any{"database": "app.db", "sql": "SELECT count(*) FROM users"})
	require.Empty(t, res.Error)
	require.Equal(t, []any{int64(3)}, res.Output.(*tool.SQLiteQueryOutput).Rows[0])
}

func TestSQLiteQueryPathConfinement(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	makeDB(t, base, "outside.db", 3)
	makeDB(t, ws, "inside.db", 2)
	require.NoError(t, os.Symlink(filepath.Join(base, "outside.db"), filepath.Join(ws, "abs-link.db")))
	require.NoError(t, os.Symlink("../outside.db", filepath.Join(ws, "rel-link.db")))
	require.NoError(t, os.Symlink(base, filepath.Join(ws, "dirlink")))
	require.NoError(t, os.Symlink("inside.db", filepath.Join(ws, "ok-link.db")))

	for _, db := range []string{"../outside.db", filepath.Join(base, "outside.db"), "abs-link.db", "rel-link.db", "dirlink/outside.db", "sub/../../outside.db"} {
		res, _ := query(t, ws, map[string]any{"database": db, "sql": "SELECT count(*) FROM users"})
		require.Contains(t, res.Error, "leaves the workspace", db)
		if !filepath.IsAbs(db) { // an absolute path is echoed as the model gave it
			require.NotContains(t, res.Error, base, "no host path in %q", res.Error)
		}
	}

	res, _ := query(t, ws, map[string]any{"database": "ok-link.db", "sql": "SELECT count(*) FROM users"})
	require.Empty(t, res.Error, "a symlink inside the workspace is followed")
	require.Equal(t, []any{int64(2)}, res.Output.(*tool.SQLiteQueryOutput).Rows[0])

	// A name SQLite's URI syntax would otherwise split.
	makeDB(t, ws, "we?ird #1%.db", 4)
	res, _ = query(t, ws, map[string]any{"database": "we?ird #1%.db", "sql": "SELECT count(*) FROM users"})
	require.Empty(t, res.Error)
	require.Equal(t, []any{int64(4)}, res.Output.(*tool.SQLiteQueryOutput).Rows[0])
}

func TestSQLiteQueryNotADatabase(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("just some text, long enough to have a header"), 0o644))
	garbage := append([]byte("SQLite format 3\x00"), make([]byte, 500)...)
	for i := 16; i < len(garbage); i++ {
		garbage[i] = byte(i * 31)
	}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "broken.db"), garbage, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "empty.db"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(ws, "dir.db"), 0o755))

	res, _ := query(t, ws, map[string]any{"database": "notes.txt", "sql": "SELECT 1"})
	require.Equal(t, `database "notes.txt" is not a SQLite database (it does not start with the SQLite header)`, res.Error)
	res, _ = query(t, ws, map[string]any{"database": "broken.db", "sql": "SELECT * FROM sqlite_master"})
	require.NotEmpty(t, res.Error)
	res, _ = query(t, ws, map[string]any{"database": "missing.db", "sql": "SELECT 1"})
	require.Contains(t, res.Error, "no such file")
	res, _ = query(t, ws, map[string]any{"database": "dir.db", "sql": "SELECT 1"})
	require.Contains(t, res.Error, "is a directory")
	res, _ = query(t, ws, map[string]any{"database": ".", "sql": "SELECT 1"})
	require.Contains(t, res.Error, "arguments.database")

	// An empty file is an empty database.
	res, _ = query(t, ws, map[string]any{"database": "empty.db", "sql": "SELECT count(*) FROM sqlite_master"})
	require.Empty(t, res.Error)
	res, _ = query(t, ws, map[string]any{"database": "empty.db", "sql": "SELECT * FROM users"})
	require.Equal(t, "query: SQL logic error: no such table: users (1)", res.Error)
	res, _ = query(t, ws, map[string]any{"database": "empty.db", "sql": "SELEC 1"})
	require.Contains(t, res.Error, "syntax error")
}

func TestSQLiteQueryTimeout(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	makeDB(t, ws, "app.db", 1)
	raw, err := json.Marshal(map[string]any{
		"database": "app.db",
		"sql":      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
	})
	require.NoError(t, err)
	res, err := (&tool.SQLiteQuery{}).Run(context.Background(), &tool.Call{Workspace: ws, Arguments: raw, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, "query timed out after 0.2s and was interrupted; make it cheaper (a LIMIT, an indexed WHERE)", res.Error)

	// A cancelled call is the engine's error, not the model's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = (&tool.SQLiteQuery{}).Run(ctx, &tool.Call{Workspace: ws, Arguments: raw})
	require.ErrorIs(t, err, context.Canceled)
}

func TestSQLiteQueryOneStatement(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	makeDB(t, ws, "app.db", 1)
	for stmt, ok := range map[string]bool{
		"SELECT 1":                              true,
		"SELECT 1;":                             true,
		"SELECT 1; -- done\n ;":                 true,
		"SELECT ';' AS a /* ; */":               true,
		`SELECT "a;b" FROM (SELECT 1 AS "a;b")`: true,
		"SELECT 1; SELECT 2":                    false,
		"SELECT 1; /* c */ DELETE FROM users":   false,
		"SELECT 'it''s'; SELECT 2":              false,
	} {
		res, _ := query(t, ws, map[string]any{"database": "app.db", "sql": stmt})
		if ok {
			require.Empty(t, res.Error, stmt)
		} else {
			require.Equal(t, "arguments.sql: must be one statement; run each statement in its own call", res.Error, stmt)
		}
	}
}

func TestSQLiteQueryReadsWALDatabase(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	p := filepath.Join(ws, "wal.db")
	db, err := sql.Open("sqlite", "file:"+p+"?_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)")
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`CREATE TABLE t (v TEXT)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO t VALUES ('in the wal')`)
	require.NoError(t, err)
	fi, err := os.Stat(p + "-wal")
	require.NoError(t, err)
	require.Positive(t, fi.Size(), "the row is still in the WAL")

	res, _ := query(t, ws, map[string]any{"database": "wal.db", "sql": "SELECT v FROM t"})
	require.Empty(t, res.Error)
	require.Equal(t, [][]any{{"in the wal"}}, res.Output.(*tool.SQLiteQueryOutput).Rows)
}
