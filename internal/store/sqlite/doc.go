// Package sqlite is the embedded storage driver: a store.Store on one SQLite
// database file (modernc.org/sqlite, pure Go, no cgo), the default for a
// single node.
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL, so a write that a
// method has acknowledged is on disk (the WAL is synced at every commit) and
// survives a crash or a power loss. foreign_keys is on: projection rows
// cannot name a session that does not exist. The journal's rows name their
// session by its number, in their key (021_journal_positions), and are
// written only by an append whose conditional UPDATE of the session's row
// returned that number, or by the session's creation.
//
// The sync is fdatasync(2) where the platform has it, as in SQLite's own
// builds (Open switches modernc.org/sqlite to it, process-wide), and on a
// disk the writer grows the WAL file with zeros ahead of its commits
// (walGrower; not on a file system in memory, where a sync writes nothing), so
// that a commit's sync writes the WAL's frames and flushes the disk's cache
// without writing the file's inode as well: a synchronous I/O fewer per
// commit, with the same durability (fdatasync writes whatever metadata
// reading the data back needs: a commit that outruns the zeros syncs the
// file's new size with its frames).
//
// # Group commit
//
// SQLite has one writer at a time and a commit costs one fsync, so all writes
// go through the writer, which owns the only write connection and runs one
// group of requests at a time (storeutil.Grouper): the caller whose request
// finds it idle runs the group itself, in its own goroutine, so a lone
// writer hands nothing to another goroutine and waits for no wake-up but
// its fsync's. A group is every request queued meanwhile (up to
// Config.MaxBatch), run in one transaction, each inside its own SAVEPOINT: a request that fails is
// rolled back alone and gets its own error while the others commit. An
// append runs without one (a savepoint copies every page its request is
// first to change): its refusals (a seq conflict, a lost lease) come before
// its first write, and any other failure of it rolls the whole batch back,
// the other requests running again in a new transaction. One COMMIT, and so
// one fsync, covers the whole batch; then each caller is answered and the
// notifications are published. Under load many appends share an fsync; a
// lone appender pays one per append.
//
// The WAL's pages are copied into the database file (a checkpoint) by a
// goroutine with a connection of its own, woken each time the commits have
// written 2,048 pages, so that no commit waits for the copy; the writer's
// own automatic checkpoint, at 4,096 pages, is there for when that one
// falls behind.
//
// Reads use a separate pool of query-only connections, which WAL lets run
// concurrently with the writer; a read that starts after a write was
// acknowledged sees it.
//
// If a caller's context ends while its write is queued, the write is skipped;
// if it ends while the write is running, the call may return the context's
// error, and the write may or may not have committed (re-read to find out,
// as with any lost reply).
//
// # Notifications
//
// SQLite has no LISTEN/NOTIFY, so Subscribe is served by an in-process hub
// (storeutil.Hub):
// after each commit the writer offers a Notification to every subscriber's
// buffered channel and drops it for a subscriber whose buffer is full.
// Notifications therefore only reach subscribers in the same process, which is
// all a single-node deployment has.
//
// # Last seqs
//
// A runner asks a session's last seq at every safe point. The writer, the
// database's only writer, records each session's seq after the commit and
// before it answers the append (lastSeqs), so SessionLastSeq answers from
// memory for the sessions appended to lately and reads the database for
// the others.
//
// # Storage format
//
// Times are stored as INTEGER unix microseconds in UTC: a time.Time round
// trips exactly at microsecond precision (finer digits are truncated), and
// every time the driver returns is in UTC. JSON documents (specs, state,
// event data, projection docs) are stored verbatim as TEXT, NULL when empty,
// and must be valid JSON. Tables are STRICT.
//
// Every append rewrites its session's row, so the row holds what changes
// and little else: a spec larger than 2 kB (it never changes) is kept in
// session_specs, and an append sets the indexed columns (status,
// runnable, wake_at) by a statement that matches the row only when their
// values change, since SQLite rewrites an index's entries for every column
// a statement sets in every row it matches.
//
// Migrations live in migrations/NNN_name.sql, are embedded in the binary,
// and are applied in order by Migrate, each in its own transaction, recorded
// in schema_migrations(version, applied_at). A database whose schema is newer
// than the driver is refused rather than written to by code that does not
// know it.
//
// # Imports
//
// This package imports the standard library, internal/store,
// internal/store/storeutil (what both drivers share that is not SQL: the
// input checks, the projection reads, the hub) and modernc.org/sqlite.
// internal/node opens it for the CLI and the library; everything else
// works against store.Store. Who may import it: internal/bench,
// internal/node and tests.
package sqlite
