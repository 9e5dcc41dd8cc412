package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync/atomic"

	msqlite "modernc.org/sqlite"
)

// checkpointer copies the WAL's pages into the database file from a
// connection of its own, so that the writer's commits do not.
//
// SQLite's automatic checkpoint (wal_autocheckpoint) runs inside the
// commit that takes the WAL past its threshold: that commit, and every
// request waiting for the writer behind it, waits while thousands of pages
// are copied and the database file is fsynced. Here the writer counts the
// pages its commits wrote and, past checkpointPages, wakes this goroutine,
// which runs a PASSIVE checkpoint: it copies what the readers and the
// writer do not need any more, without taking the write lock, while the
// writer goes on committing. The writer's own automatic checkpoint stays, at
// a higher threshold, for when this one falls behind (a checkpoint that
// commits overtook is partial, and the WAL starts again from its beginning
// only once a checkpoint has copied all of it).
//
// Nothing about durability changes: a commit is durable once the WAL is
// fsynced, before the writer answers; the checkpoint fsyncs the WAL before it
// copies (synchronous=FULL on its connection too) and the database file
// after.
type checkpointer struct {
	db   *sql.DB
	log  *slog.Logger
	wake chan struct{} // buffered: the writer never waits
	done chan struct{}

	// Counters for tests.
	runs   atomic.Int64 // checkpoints run
	copied atomic.Int64 // WAL frames the last checkpoint found copied
}

func newCheckpointer(db *sql.DB, log *slog.Logger) *checkpointer {
	c := &checkpointer{db: db, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *checkpointer) loop() {
	defer close(c.done)
	for range c.wake {
		var busy, frames, copied int64
		err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
		if err != nil {
			c.log.Warn("sqlite background checkpoint failed; the writer's own checkpoint will copy the WAL", "err", err)
			continue
		}
		c.runs.Add(1)
		c.copied.Store(copied)
	}
}

// signal wakes the goroutine, unless a wake is pending already.
func (c *checkpointer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// close stops the goroutine once its checkpoint in progress has ended and
// closes its connection. Only the writer signals, and it has stopped.
func (c *checkpointer) close() error {
	close(c.wake)
	<-c.done
	return c.db.Close()
}

// walPagesWritten returns how many pages the write connection has written
// to the WAL since the last call (SQLITE_DBSTATUS_CACHE_WRITE, reset at
// each read: SQLite keeps it in 32 bits).
func (w *writer) walPagesWritten() (int64, error) {
	var n int
	err := w.conn.Raw(func(dc any) error {
		st, ok := dc.(msqlite.DBStatus)
		if !ok {
			return errors.New("the sqlite driver reports no connection status")
		}
		var err error
		n, _, err = st.Status(msqlite.DBStatusCacheWrite, true)
		return err
	})
	return int64(n), err
}

// afterCommit grows the WAL ahead of the commits and wakes the
// checkpointer once the commits since its last wake have written
// checkpointPages pages to the WAL.
func (w *writer) afterCommit() {
	if w.ckpt == nil && w.wal == nil {
		return
	}
	n, err := w.walPagesWritten()
	if err != nil {
		return
	}
	w.wal.afterCommit(n)
	if w.ckpt == nil {
		return
	}
	w.pagesSinceWake += n
	if w.pagesSinceWake >= w.checkpointPages {
		w.pagesSinceWake = 0
		w.ckpt.signal()
	}
}
