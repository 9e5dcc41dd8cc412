// Package postgres is the storage driver for several nodes: a store.Store on
// one PostgreSQL database (github.com/jackc/pgx/v5 and its pool), shared by
// every node of a deployment. It keeps the semantics of the SQLite driver,
// which the conformance suite in internal/store/storetest checks for both.
//
// # Connecting
//
// Open takes a connection string, a postgres:// URL or key=value pairs, as
// libpq and pgx read them (pool_max_conns and the other pgxpool settings
// included). The tables live in the first schema of the search_path, which a
// URL sets with ?search_path=name, so several deployments (or tests) can
// share a database. The connection string is never written into an error or
// a log line: it may hold a password.
//
// # Transactions and fencing
//
// Each write is one transaction at READ COMMITTED, sent in pipelined batches
// (BEGIN travels with the first statements). The hot writes, appends and
// session creations, are one batch each, without BEGIN or COMMIT:
// PostgreSQL runs a batch up to its Sync as one implicit transaction, so an
// append costs one round trip. A committer (committer.go) sends the appends
// queued while its previous group was committing as one batch, so concurrent
// sessions share a transaction and its WAL flush; a write that fails in a
// group is taken out and run alone, so each keeps its own outcome. As a
// batch commits whatever its callbacks think, every condition of these
// writes is checked inside the database: a statement that matched no row
// fails there (checkedSQL) and the whole transaction with it.
//
// An append is one conditional UPDATE of the session row, on the seq the
// caller last saw and, for a worker, on the lease (owner, epoch) it holds;
// only when that matches no row does the driver read the row and say why:
// store.ErrLeaseLost first (a zombie learns it lost its lease whatever seq
// it expected), then store.ErrConflict. The events and the projection rows
// are written by the same statement (appendSQL, appendStatement: CTEs over
// arrays, each table's rows read in a form chosen by their number:
// appendrows.go), the blobs in the same batch: all commit with it or not
// at all.
// The server alone parses the append's JSON documents (appendChecks); a
// failed append is checked again, so bad input is refused as the store's
// checks refuse it. The committer and the id readers (reader.go) run on
// connections of their own, carved out of the pool, whose statements are
// planned once (hotPoolConfig); the claims, whose plans depend on partial
// indexes, and every other statement use the rest of the pool.
// A projection row whose id is another session's fails the statement with
// an error of its own, and the driver reads which one it was. Concurrent
// writers of one session queue on its row lock; the loser re-checks the
// new row and gets ErrConflict. The journal and projection tables hold no
// foreign key to sessions (migration 020): their rows are only written
// with the UPDATE or the INSERT of their session's row, and a session is
// never deleted.
//
// Leases are claimed with one UPDATE over a SELECT ... FOR UPDATE SKIP
// LOCKED, so nodes claiming at the same time take disjoint sessions without
// waiting for each other, and each claim bumps the session's epoch.
//
// A write that PostgreSQL aborts as a deadlock or a serialization failure is
// run again, a few times, from the start (it has had no effect).
//
// # Notifications
//
// A worker's append that keeps its lease does not announce the session as
// claimable (KindRunnable): nobody can claim it until the lease is released
// or expires. After a commit the driver publishes its notifications to this process's
// subscribers at once, and queues them for the other nodes: a notifier
// goroutine sends everything queued, coalesced, with one NOTIFY statement
// on a channel named after the schema (payload: format, the sender's
// instance id, kind, seq, session id). It does not NOTIFY inside the
// write's transaction because PostgreSQL serialises the commits of
// notifying transactions under one cluster-wide lock held through their WAL
// flush: writers would wait for each other. Each Store keeps one connection
// that LISTENs on the channel and hands other nodes' notifications to its
// subscribers (its own it has already delivered). As with SQLite they are
// hints: a subscriber whose buffer is full misses some, and a node that
// dies between a commit and its NOTIFY loses those, so subscribers must
// re-read the store (schedulers also poll). When the listening connection
// drops, the Store reconnects (with backoff); once listening again it
// re-announces, as KindEvents, the sessions whose journal grew since shortly
// before the connection was last known to work (sessions.appended_at, on
// the database's clock), and sends KindRunnable, KindSecrets and
// KindActionRaised with no session, so schedulers, secret holders and
// holders of a "no action pending" answer re-read. A connection pooler in
// transaction mode cannot carry LISTEN: give the driver a direct connection
// string.
//
// # Migrations
//
// migrations/NNN_name.sql are embedded and applied in order by Migrate, each
// in its own transaction with its schema_migrations row, under a
// session-level advisory lock keyed by the schema, so nodes starting
// together migrate once. A schema newer than the driver is refused.
//
// # Storage format
//
// Times are TIMESTAMPTZ at microsecond precision and come back in UTC.
// Documents the engine writes are JSON (kept verbatim), not JSONB; see
// migrations/001_init.sql. Identifiers are TEXT COLLATE "C", so lists come in
// byte order as with SQLite.
//
// # Tests
//
// The package's tests need a PostgreSQL server: LONGHAUL_TEST_POSTGRES (or
// LONGHAUL_TEST_POSTGRES_URL) names a database by its connection string,
// e.g. postgres://postgres@127.0.0.1:5432/longhaul_test?sslmode=disable, in
// which each test creates and drops a schema of its own. Without it the
// tests skip, except when CI=true, where they fail: .ci/run starts a
// throwaway cluster and sets the variable.
//
// # Imports
//
// This package imports the standard library, internal/store,
// internal/store/storeutil (what both drivers share that is not SQL: the
// input checks, the projection reads, the hub) and pgx; its tests use
// internal/store/postgres/pgtest for their database. internal/node opens it
// for the CLI and the library; everything else works against store.Store.
// Who may import it: internal/bench, internal/node and tests.
package postgres
