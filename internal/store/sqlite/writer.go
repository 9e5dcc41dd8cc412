package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// request is one write for the writer.
type request struct {
	ctx context.Context
	// run does the write inside the batch transaction (and its own
	// savepoint). It returns the notifications to publish once the batch has
	// committed. It may run more than once if the batch transaction has to be
	// restarted, so it must set, not accumulate, anything it reports.
	run func(w *writer) ([]store.Notification, error)
	// raw, when set instead of run, runs alone outside any batch transaction
	// and manages its own transactions (migrations, tests).
	raw func(w *writer) error
	// bare runs run without a savepoint of its own. A bare request's
	// refusal that wrote nothing is an unwrittenError, and the batch goes
	// on; any other error rolls the whole batch back and the others run
	// again in a new transaction, as after a failed savepoint rollback.
	// For a request that is refused often and before its first write
	// (an append: a seq conflict, a lost lease), and fails otherwise
	// rarely: a savepoint copies each page the request is first to
	// change into its journal, and costs two statements.
	bare bool

	done  chan error // buffered: the writer never blocks answering
	notes []store.Notification
}

// writer owns the only write connection. One group of requests runs at a
// time (groups), so conn and stmts have one user at a time and need no
// locking beyond what stmtCache does anyway.
type writer struct {
	db       *sql.DB
	conn     *sql.Conn
	stmts    stmtCache
	maxBatch int
	hub      *storeutil.Hub
	seqs     *lastSeqs
	log      *slog.Logger

	// ckpt copies the WAL into the database off the writer's path, woken
	// once the commits have written checkpointPages pages since its last
	// wake (pagesSinceWake); nil when the store has none.
	ckpt            *checkpointer
	checkpointPages int64
	pagesSinceWake  int64
	// wal grows the WAL file ahead of the commits (walGrower); nil when
	// the store does not.
	wal *walGrower
	// nums are the numbers of the sessions appended to (sessionNums).
	nums *sessionNums

	// groups runs the requests, one group at a time: the caller whose
	// request finds the writer idle runs it in its own goroutine (one
	// session at a time hands nothing to another goroutine, and waits for
	// no wake-up but its fsync's), and the requests queued meanwhile run
	// next as one group.
	groups *storeutil.Grouper[*request]

	// Counters for tests and benchmarks.
	commits  atomic.Int64 // committed batch transactions (one fsync each)
	executed atomic.Int64 // requests that committed
	busy     atomic.Int64 // nanoseconds spent running batches, commits included
	// appends whose UPDATE set the session's indexed columns (appendAllSQL)
	indexedSets atomic.Int64
}

func newWriter(db *sql.DB, conn *sql.Conn, maxBatch int, h *storeutil.Hub, seqs *lastSeqs, log *slog.Logger, ckpt *checkpointer, wal *walGrower) *writer {
	w := &writer{
		db:              db,
		conn:            conn,
		maxBatch:        maxBatch,
		hub:             h,
		seqs:            seqs,
		log:             log,
		ckpt:            ckpt,
		wal:             wal,
		checkpointPages: backgroundCheckpointPages,
		nums:            newSessionNums(),
	}
	w.stmts.prepare = conn.PrepareContext
	w.groups = storeutil.NewGrouper(1, maxBatch, w.run)
	return w
}

// do queues req and waits for its answer: it runs req itself (with what was
// queued meanwhile) if the writer is idle. See the package comment for what
// a context that ends while the request is queued or running means.
func (w *writer) do(ctx context.Context, req *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req.ctx = ctx
	req.done = make(chan error, 1)
	if err := w.groups.Add(req); err != nil {
		return err
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		// Prefer a result that is already there over the context's error.
		select {
		case err := <-req.done:
			return err
		default:
			return ctx.Err()
		}
	}
}

// close lets the queued requests finish, then closes the connection; later
// requests get store.ErrClosed.
func (w *writer) close() error {
	w.groups.Stop()
	var ckptErr error
	if w.ckpt != nil {
		ckptErr = w.ckpt.close()
	}
	w.stmts.closeAll()
	return errors.Join(ckptErr, w.conn.Close(), w.db.Close())
}

// run runs a group of requests in the order they came: each run of
// ordinary requests as one batch transaction, and each raw request alone,
// after the requests before it.
func (w *writer) run(group []*request) {
	start := time.Now()
	for len(group) > 0 {
		n := 1
		if group[0].raw != nil {
			w.runRaw(group[0])
		} else {
			for n < len(group) && group[n].raw == nil {
				n++
			}
			w.runBatch(group[:n])
		}
		group = group[n:]
	}
	w.busy.Add(int64(time.Since(start)))
}

func (w *writer) runRaw(req *request) {
	if err := req.ctx.Err(); err != nil {
		req.done <- err
		return
	}
	err := req.raw(w)
	w.seqs.forget() // it may have written anything
	w.nums.forget()
	req.done <- err
}

// runBatch commits as many of reqs as it can in one transaction. A request
// whose failure took the whole transaction down with it (SQLite rolls back
// the transaction on some I/O and memory errors) gets its error and the rest
// run again in a new transaction; each such round removes at least one
// request, so it ends.
func (w *writer) runBatch(reqs []*request) {
	pending := reqs
	for len(pending) > 0 {
		pending = w.attempt(pending)
	}
}

// attempt runs reqs in one transaction, answers every request it settles and
// returns those that must be retried.
func (w *writer) attempt(reqs []*request) []*request {
	if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
		err = fmt.Errorf("begin batch: %w", mapErr(err))
		for _, r := range reqs {
			r.done <- err
		}
		return nil
	}
	w.nums.rolledBack() // nothing read before this transaction is pending
	savepoints := len(reqs) > 1
	ok := make([]*request, 0, len(reqs))
	for i, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			// Its caller gave up before it started: skip it, it has no effect.
			r.done <- err
			continue
		}
		if r.bare && savepoints {
			notes, err := r.run(w)
			if err != nil {
				var unwritten unwrittenError
				if errors.As(err, &unwritten) {
					r.done <- unwritten.error
					continue
				}
				w.rollback()
				r.done <- err
				return append(ok, reqs[i+1:]...)
			}
			r.notes = notes
			ok = append(ok, r)
			continue
		}
		if !savepoints {
			notes, err := r.run(w)
			if err != nil {
				w.rollback()
				var unwritten unwrittenError
				if errors.As(err, &unwritten) {
					err = unwritten.error
				}
				r.done <- err
				return nil
			}
			r.notes = notes
			ok = append(ok, r)
			continue
		}
		if _, err := w.exec("SAVEPOINT req"); err != nil {
			w.rollback()
			r.done <- fmt.Errorf("savepoint: %w", mapErr(err))
			return append(ok, reqs[i+1:]...)
		}
		notes, err := r.run(w)
		if err != nil {
			// A number the request read may be of a session it created
			// and has just taken back (sessionNums).
			w.nums.rolledBack()
			if _, rbErr := w.exec("ROLLBACK TO req"); rbErr != nil {
				w.log.Warn("sqlite batch transaction aborted by a failed request; retrying the rest",
					"err", err, "rollback_err", rbErr)
				w.rollback()
				r.done <- err
				return append(ok, reqs[i+1:]...)
			}
			if _, relErr := w.exec("RELEASE req"); relErr != nil {
				w.rollback()
				r.done <- err
				return append(ok, reqs[i+1:]...)
			}
			r.done <- err
			continue
		}
		if _, err := w.exec("RELEASE req"); err != nil {
			w.rollback()
			r.done <- fmt.Errorf("release savepoint: %w", mapErr(err))
			return append(ok, reqs[i+1:]...)
		}
		r.notes = notes
		ok = append(ok, r)
	}
	if len(ok) == 0 {
		w.rollback()
		return nil
	}
	if _, err := w.exec("COMMIT"); err != nil {
		w.log.Error("sqlite batch commit failed", "requests", len(ok), "err", err)
		w.rollback()
		err = fmt.Errorf("commit batch: %w", mapErr(err))
		for _, r := range ok {
			r.done <- err
		}
		return nil
	}
	w.commits.Add(1)
	w.executed.Add(int64(len(ok)))
	w.nums.committed()
	// Publish before answering: a caller that saw its write acknowledged and
	// then subscribes does not get a stale notification of it, and one that
	// subscribed first has it by the time its call returns. The same holds
	// for the sessions' last seqs (lastSeqs).
	for _, r := range ok {
		for _, n := range r.notes {
			if n.Kind == store.KindEvents {
				w.seqs.advance(n.SessionID, n.Seq)
			}
			w.hub.Publish(n)
		}
	}
	for _, r := range ok {
		r.done <- nil
	}
	w.afterCommit()
	return nil
}

// rollback ends the open transaction, if SQLite has not ended it already.
func (w *writer) rollback() {
	w.nums.rolledBack()
	if _, err := w.exec("ROLLBACK"); err != nil && !isNoTransaction(err) {
		w.log.Error("sqlite rollback failed", "err", err)
	}
}

// exec runs a cached statement on the write connection. The writer's
// statements ignore callers' contexts: one caller giving up must not abort a
// batch that carries other callers' writes.
func (w *writer) exec(query string, args ...any) (sql.Result, error) {
	st, err := w.stmts.get(context.Background(), query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(context.Background(), args...)
}

// queryRow runs a cached single-row query on the write connection, inside
// the current transaction.
func (w *writer) queryRow(query string, args ...any) *sql.Row {
	st, err := w.stmts.get(context.Background(), query)
	if err != nil {
		// Surface the prepare error through Scan, as database/sql does.
		return w.conn.QueryRowContext(context.Background(), query, args...)
	}
	return st.QueryRowContext(context.Background(), args...)
}

// changed runs exec and reports how many rows it changed.
func (w *writer) changed(query string, args ...any) (int64, error) {
	res, err := w.exec(query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// unwrittenError is a bare request's refusal before it wrote anything
// (see request.bare).
type unwrittenError struct{ error }

func (e unwrittenError) Unwrap() error { return e.error }
