package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	// Registers modernc.org/sqlite (the driver Longhaul's store uses too)
	// with database/sql as "sqlite", and with DBOS.
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"
	msqlite "modernc.org/sqlite"
)

// store is where one run keeps its state: a fresh SQLite file, or a fresh
// schema of a PostgreSQL database, dropped again on close.
type store struct {
	// sqlitePath is the database file on SQLite; "" on PostgreSQL.
	sqlitePath string
	// pgURL and schema locate the run's schema on PostgreSQL.
	pgURL, schema string
	// pgSettings is what the server reports for its durability settings.
	pgSettings string
	drop       func()
}

func openStore(ctx context.Context, kind, pgURL, dir string) (*store, error) {
	if kind == "sqlite" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return &store{sqlitePath: filepath.Join(dir, "peers.db"), drop: func() {}}, nil
	}
	cfg, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return nil, errors.New("--url cannot be parsed (it is not shown, as it may hold a password)")
	}
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	schema := "longhaul_peers_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, sql string) (string, error) {
		conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
		if err != nil {
			return "", fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if sql == "" {
			var fsync, syncCommit, version string
			err := conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('server_version')").Scan(&fsync, &syncCommit, &version)
			return fmt.Sprintf("PostgreSQL %s, fsync=%s, synchronous_commit=%s", version, fsync, syncCommit), err
		}
		_, err = conn.Exec(ctx, sql)
		return "", err
	}
	settings, err := exec(ctx, "")
	if err != nil {
		return nil, err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		return nil, fmt.Errorf("create the run's schema: %w", err)
	}
	// The URL's search_path points at the run's schema, so nothing of the
	// run lands in the database's other schemas.
	u, err := url.Parse(pgURL)
	if err != nil {
		return nil, errors.New("--url cannot be parsed (it is not shown, as it may hold a password)")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return &store{pgURL: u.String(), schema: schema, pgSettings: settings, drop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = exec(ctx, "DROP SCHEMA "+ident+" CASCADE")
	}}, nil
}

func (s *store) close() { s.drop() }

func (s *store) describe() string {
	if s.sqlitePath != "" {
		return "SQLite (WAL, synchronous=FULL, checked on the open handle, commits synced with fdatasync), modernc.org/sqlite"
	}
	return s.pgSettings + ", a temporary schema of --url"
}

// openSQLite opens the run's database with synchronous=FULL on every
// connection, as Longhaul's store does: a commit is on disk when it returns.
// (DBOS opens its own handle with synchronous=NORMAL, which can lose the last
// commits on power loss; this handle is given to it instead, so the two are
// compared like for like.) It fails unless the pragma took effect. Its
// commits sync with fdatasync, as Longhaul's store switches the library to
// (and as SQLite's own builds do on Linux): on the library's default,
// fsync, a peer's commits would also write the WAL's timestamps, which
// Longhaul's do not.
func openSQLite(ctx context.Context, path string, maxConns int) (*sql.DB, error) {
	if _, err := msqlite.Fdatasync(true); err != nil && !errors.Is(err, msqlite.ErrFdatasyncUnavailable) {
		return nil, err
	}
	q := url.Values{}
	// DBOS's own handle begins every transaction IMMEDIATE: a writer takes
	// the lock up front instead of failing to upgrade a read lock.
	q.Set("_txlock", "immediate")
	for _, p := range []string{"busy_timeout(5000)", "foreign_keys(ON)", "journal_mode(WAL)", "synchronous(FULL)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", OmitHost: true, Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	var synchronous int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&synchronous); err != nil {
		db.Close()
		return nil, err
	}
	if synchronous != 2 { // 2 is FULL
		db.Close()
		return nil, fmt.Errorf("SQLite synchronous is %d, want 2 (FULL)", synchronous)
	}
	return db, nil
}
