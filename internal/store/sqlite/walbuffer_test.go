package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// walCounts returns the WAL writes SQLite made through the buffering VFS
// and the writes made to the files since before. The counters are the
// process's: the tests that read them are not parallel, so no other
// store writes meanwhile.
func walCounts(before [2]int64) (writes, fileWrites int64) {
	return walWrites.Load() - before[0], walFileWrites.Load() - before[1]
}

func walCountsNow() [2]int64 { return [2]int64{walWrites.Load(), walFileWrites.Load()} }

// walBufferVFSOrSkip returns the buffering VFS's name, registered; the
// test is skipped where SQLite has no unix VFS, where the store writes
// with the platform's own.
func walBufferVFSOrSkip(t *testing.T) string {
	t.Helper()
	vfs, err := registerWALBufferVFS()
	require.NoError(t, err)
	if vfs == "" {
		t.Skip("SQLite has no unix VFS here: the store's WAL is not buffered")
	}
	return vfs
}

// TestWALBufferGathersACommit: a commit's frames, which SQLite writes as a
// header and a page each, reach the WAL file in one write, made before
// the commit returns: a reader on another connection (the plain VFS)
// finds the events at once.
func TestWALBufferGathersACommit(t *testing.T) {
	walBufferVFSOrSkip(t)
	s := openMigrated(t, nil)
	ctx := t.Context()
	createSession(t, s, "ses_walbuf", false)
	// The first append after the migrations may start the WAL over, whose
	// header SQLite syncs on its own.
	_, err := s.EventAppend(ctx, appendParams("ses_walbuf", 1, 2))
	require.NoError(t, err)

	before := walCountsNow()
	last := int64(3)
	for range 3 {
		_, err := s.EventAppend(ctx, appendParams("ses_walbuf", last, 6))
		require.NoError(t, err)
		last += 6
		evs, err := s.EventList(ctx, "ses_walbuf", 0, 100)
		require.NoError(t, err)
		require.Len(t, evs, int(last), "a reader does not see the commit that returned")
	}
	writes, fileWrites := walCounts(before)
	require.GreaterOrEqual(t, writes, int64(3*4), "SQLite wrote fewer than two frames a commit")
	require.Equal(t, int64(3), fileWrites, "%d writes by SQLite made %d writes to the file, not one a commit", writes, fileWrites)
}

// TestWALBufferLargeTransaction: a transaction larger than the buffer goes
// to the file in writes of the buffer's size, and reads back whole, in
// this store and after it is closed and opened again.
func TestWALBufferLargeTransaction(t *testing.T) {
	walBufferVFSOrSkip(t)
	path := filepath.Join(t.TempDir(), "large.db")
	s, err := Open(t.Context(), path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	createSession(t, s, "ses_large", false)

	p := appendParams("ses_large", 1, 64)
	for i := range p.Events {
		// 64 events of 6 KiB: about 100 pages, six times the buffer.
		p.Events[i].Data = json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat(strconv.Itoa(i%10), 6<<10)))
	}
	before := walCountsNow()
	_, err = s.EventAppend(t.Context(), p)
	require.NoError(t, err)
	writes, fileWrites := walCounts(before)
	require.Greater(t, fileWrites, int64(1))
	require.Less(t, fileWrites, writes/8, "the large commit's %d writes made %d writes to the file", writes, fileWrites)

	check := func(s *Store) {
		evs, err := s.EventList(t.Context(), "ses_large", 1, 100)
		require.NoError(t, err)
		require.Len(t, evs, 64)
		for i, ev := range evs {
			require.JSONEq(t, string(p.Events[i].Data), string(ev.Data), "event %d", i)
		}
		integrityOK(t, s.read)
	}
	check(s)
	require.NoError(t, s.Close())
	check(openPath(t, path, nil))
}

// TestWALBufferCommitsSurviveSIGKILL: every append acknowledged before the
// process is killed is in the database afterwards, and the database is
// whole. A frame left in the buffer when its commit returned would be
// lost with the process (what the kernel has is kept).
func TestWALBufferCommitsSurviveSIGKILL(t *testing.T) {
	if dir := os.Getenv("LONGHAUL_WALBUF_CHILD"); dir != "" {
		walBufferChild(dir)
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "killed.db")
	s, err := Open(t.Context(), path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	createSession(t, s, "ses_killed", false)
	require.NoError(t, s.Close())

	cmd := exec.Command(os.Args[0], "-test.run", "^TestWALBufferCommitsSurviveSIGKILL$")
	cmd.Env = append(os.Environ(), "LONGHAUL_WALBUF_CHILD="+path)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	in, err := cmd.StdinPipe() // held open: the child waits on it
	require.NoError(t, err)
	defer in.Close()
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	// The child stops once it has acknowledged 100 appends, and waits to
	// be killed: the appends are all it did.
	var acked int64
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "stopped" {
		if seq, err := strconv.ParseInt(strings.TrimPrefix(lines.Text(), "acked "), 10, 64); err == nil {
			acked = seq
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.Equal(t, int64(301), acked, "the child did not acknowledge its 100 appends")

	s = openPath(t, path, nil)
	row, err := s.SessionGet(t.Context(), "ses_killed")
	require.NoError(t, err)
	require.Equal(t, acked, row.LastSeq, "an acknowledged append was lost")
	evs, err := s.EventList(t.Context(), "ses_killed", 0, int(row.LastSeq)+10)
	require.NoError(t, err)
	require.Len(t, evs, int(row.LastSeq))
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Seq)
	}
	integrityOK(t, s.read)
}

// walBufferChild makes 100 appends to ses_killed, saying on stdout each
// seq acknowledged, then waits to be killed.
func walBufferChild(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	last := int64(1)
	for range 100 {
		p := appendParams("ses_killed", last, 3)
		p.Docs = []store.DocWrite{{Kind: store.DocCheckpoint, ID: fmt.Sprintf("ckpt_%d", last), SessionID: "ses_killed",
			Status: "done", Doc: json.RawMessage(`{"pad":"` + strings.Repeat("c", 300) + `"}`), CreatedAt: testTime}}
		if _, err := s.EventAppend(ctx, p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		last += 3
		fmt.Printf("acked %d\n", last)
	}
	fmt.Println("stopped")
	_, _ = io.Copy(io.Discard, os.Stdin) // killed here: the parent holds stdin open
	os.Exit(3)
}

// openRaw opens a connection of its own to path, with the buffering VFS
// when vfs is walBufferVFS, and the PRAGMAs.
func openRaw(t *testing.T, path, vfs string, pragmas ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, vfs, pragmas))
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	_, err := db.Exec(q, args...)
	require.NoError(t, err, q)
}

func integrityOK(t *testing.T, db *sql.DB) {
	t.Helper()
	var ok string
	require.NoError(t, db.QueryRow("PRAGMA integrity_check").Scan(&ok))
	require.Equal(t, "ok", ok)
}

// TestWALBufferRollbackAfterSpill: a transaction that spilled pages to the
// WAL before it was rolled back leaves nothing behind: another connection's
// commits at the same place in the WAL stay whole when the first
// connection writes again. Kept and written at its next access, the
// rolled-back frames went over them.
func TestWALBufferRollbackAfterSpill(t *testing.T) {
	vfs := walBufferVFSOrSkip(t)
	path := filepath.Join(t.TempDir(), "spill.db")
	// A page cache of ten pages: the transaction spills.
	a := openRaw(t, path, vfs, "journal_mode(WAL)", "synchronous(FULL)", "cache_size(10)", "wal_autocheckpoint(0)")
	b := openRaw(t, path, "", "journal_mode(WAL)", "synchronous(FULL)", "wal_autocheckpoint(0)")
	mustExec(t, a, "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
	mustExec(t, a, "CREATE TABLE u (k INTEGER PRIMARY KEY, v BLOB)")
	mustExec(t, b, "PRAGMA wal_checkpoint(TRUNCATE)")

	before := walCountsNow()
	tx, err := a.Begin()
	require.NoError(t, err)
	for range 100 {
		_, err := tx.Exec("INSERT INTO t (v) VALUES (?)", strings.Repeat("A", 3000))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Rollback())
	writes, _ := walCounts(before)
	require.Greater(t, writes, int64(0), "the transaction spilled nothing")

	for range 150 {
		mustExec(t, b, "INSERT INTO u (v) VALUES (?)", strings.Repeat("B", 3000))
	}
	mustExec(t, a, "INSERT INTO t (v) VALUES (x'00')")
	c := openRaw(t, path, "")
	integrityOK(t, c)
	var n int
	require.NoError(t, c.QueryRow("SELECT count(*) FROM u WHERE v = ?", strings.Repeat("B", 3000)).Scan(&n))
	require.Equal(t, 150, n)
	require.NoError(t, c.QueryRow("SELECT count(*) FROM t").Scan(&n))
	require.Equal(t, 1, n)
}

// TestWALBufferWithoutPowersafeOverwrite: a database whose device may
// damage the bytes around a write (psow=0) has its commits padded to a
// sector boundary, the end written after the sync: its WAL is not
// buffered, and every commit is read whole by another connection at once.
func TestWALBufferWithoutPowersafeOverwrite(t *testing.T) {
	vfs := walBufferVFSOrSkip(t)
	path := filepath.Join(t.TempDir(), "psow.db")
	db, err := sql.Open("sqlite", dsn(path, vfs, []string{"journal_mode(WAL)", "synchronous(FULL)", "wal_autocheckpoint(0)"})+"&psow=0")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	mustExec(t, db, "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
	r := openRaw(t, path, "")
	before := walCountsNow()
	for i := range 50 {
		want := strings.Repeat(string(rune('a'+i%26)), 1000)
		mustExec(t, db, "INSERT INTO t (k, v) VALUES (?, ?)", i, want)
		var got string
		require.NoError(t, r.QueryRow("SELECT v FROM t WHERE k = ?", i).Scan(&got), "commit %d", i)
		require.Equal(t, want, got, "commit %d", i)
	}
	writes, _ := walCounts(before)
	require.Zero(t, writes, "the WAL was buffered")
}

// TestWALBufferFlushFailure: a flush that fails (the disk full) when
// SQLite reads the WAL loses frames it spilled earlier in the
// transaction: the transaction does not commit, and the database stays
// whole. Returned as the full disk it is, SQLite rolled back the
// statement alone and committed the rest, frames missing.
func TestWALBufferFlushFailure(t *testing.T) {
	vfs := walBufferVFSOrSkip(t)
	path := filepath.Join(t.TempDir(), "full.db")
	db := openRaw(t, path, vfs, "journal_mode(WAL)", "synchronous(FULL)", "cache_size(10)", "wal_autocheckpoint(0)")
	mustExec(t, db, "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
	mustExec(t, db, "CREATE TABLE u (k INTEGER PRIMARY KEY, h TEXT UNIQUE)")
	tx, err := db.Begin()
	require.NoError(t, err)
	for i := range 100 {
		_, err := tx.Exec("INSERT INTO t (k, v) VALUES (?, ?)", i, strings.Repeat(strconv.Itoa(i%10), 3000))
		require.NoError(t, err)
	}
	walFlushFault.Store(true)
	t.Cleanup(func() { walFlushFault.Store(false) })
	// A statement journal (a UNIQUE column), and a read of the WAL first.
	_, err = tx.Exec("INSERT INTO u SELECT k, hex(substr(v, 1, 8)) || k FROM t")
	require.Error(t, err)
	require.False(t, walFlushFault.Load(), "no flush failed")
	err = tx.Commit()
	r := openRaw(t, path, "")
	integrityOK(t, r)
	var n int
	require.NoError(t, r.QueryRow("SELECT count(*) FROM t").Scan(&n))
	if err == nil {
		require.Equal(t, 100, n, "the transaction committed without its rows")
	} else {
		require.Zero(t, n, "the transaction failed and left rows")
	}
}

// TestWALBufferSameAsUnbuffered: transactions that rewrite pages they
// wrote before (SQLite then rewrites their frames in place), spill, roll
// back and commit leave a database that reads as the same transactions
// made through the platform's VFS leave it, and read whole by another
// connection after each.
func TestWALBufferSameAsUnbuffered(t *testing.T) {
	vfs := walBufferVFSOrSkip(t)
	dir := t.TempDir()
	contents := make([]string, 2)
	before := walCountsNow()
	for i, v := range []string{vfs, ""} {
		path := filepath.Join(dir, fmt.Sprintf("db%d.db", i))
		db := openRaw(t, path, v, "journal_mode(WAL)", "synchronous(FULL)", "cache_size(12)", "wal_autocheckpoint(0)")
		mustExec(t, db, "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
		r := openRaw(t, path, "")
		for round := range 20 {
			tx, err := db.Begin()
			require.NoError(t, err)
			for i := range 60 {
				k := (round*37 + i*13) % 400
				_, err := tx.Exec("INSERT OR REPLACE INTO t (k, v) VALUES (?, ?)", k, strings.Repeat(fmt.Sprintf("%d-%d;", round, k), 150))
				require.NoError(t, err)
				if i%7 == 0 {
					_, err := tx.Exec("UPDATE t SET v = v || 'x' WHERE k % 50 = ?", i%50)
					require.NoError(t, err)
				}
			}
			if round%5 == 4 {
				require.NoError(t, tx.Rollback())
			} else {
				require.NoError(t, tx.Commit())
			}
			integrityOK(t, r)
		}
		require.NoError(t, r.QueryRow("SELECT group_concat(k || '=' || v, ',') FROM (SELECT k, v FROM t ORDER BY k)").Scan(&contents[i]))
	}
	require.Equal(t, contents[1], contents[0])
	writes, fileWrites := walCounts(before)
	require.Less(t, fileWrites, writes/2, "the WAL was not buffered")
}

// TestCheckWALRefusesALighterSync: the writer's connection must sync the
// WAL at every commit, since the buffering VFS writes a commit's frames
// only when SQLite syncs them; checkWAL refuses one in NORMAL and takes
// one in FULL.
func TestCheckWALRefusesALighterSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sync.db")
	for _, c := range []struct {
		sync string
		ok   bool
	}{{"NORMAL", false}, {"OFF", false}, {"FULL", true}, {"EXTRA", true}} {
		db, err := sql.Open("sqlite", dsn(path, "", []string{"journal_mode(WAL)", "synchronous(" + c.sync + ")"}))
		require.NoError(t, err)
		conn, err := db.Conn(t.Context())
		require.NoError(t, err)
		err = checkWAL(t.Context(), conn)
		if c.ok {
			require.NoError(t, err, c.sync)
		} else {
			require.ErrorContains(t, err, "synchronous", c.sync)
		}
		require.NoError(t, conn.Close())
		require.NoError(t, db.Close())
	}
}
