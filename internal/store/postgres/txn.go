package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/longhaul-dev/longhaul/internal/store"
)

const (
	// maxWriteAttempts bounds the runs of a write that PostgreSQL aborted as
	// a deadlock or a serialization failure.
	maxWriteAttempts = 4
	// rollbackTimeout bounds a rollback, which runs even when the caller's
	// context has ended (the connection must go back to the pool clean).
	rollbackTimeout = 5 * time.Second
)

// txn is one write transaction, pipelined: statements are queued and sent in
// batches, each one round trip. The first batch begins the transaction
// (pgx.Batch.BeginTx), so BEGIN costs no round trip of its own; results are
// read by the callbacks given to the queued statements.
type txn struct {
	s     *Store
	tx    pgx.Tx // nil until the first batch is sent
	b     *pgx.Batch
	notes []store.Notification
	// later are notifications other nodes may hear a moment late
	// (notifier.go): this node's subscribers still have them at once.
	later []store.Notification
}

// queue adds a statement to the next batch.
func (t *txn) queue(sql string, args ...any) *pgx.QueuedQuery {
	if t.b == nil {
		t.b = &pgx.Batch{}
		if t.tx == nil {
			t.b.BeginTx(pgx.TxOptions{})
		}
	}
	return t.b.Queue(sql, args...)
}

// flush sends the queued statements and runs their callbacks; the first
// error (the database's, or a callback's) is returned, and the transaction
// must then be abandoned.
func (t *txn) flush(ctx context.Context) error {
	b := t.b
	if b == nil {
		return nil
	}
	t.b = nil
	var br pgx.BatchResults
	if t.tx == nil {
		br = t.s.pool.SendBatch(ctx, b)
		t.tx = br.Tx()
	} else {
		br = t.tx.SendBatch(ctx, b)
	}
	return br.Close()
}

// notify publishes n once the transaction commits: to this process's
// subscribers directly, to other nodes' through the notifier.
func (t *txn) notify(n ...store.Notification) { t.notes = append(t.notes, n...) }

// notifyLater is notify for a notification no other node waits on to act:
// the notifier may hold it up to lateNotifyDelay to send it with others.
func (t *txn) notifyLater(n store.Notification) { t.later = append(t.later, n) }

// write runs fn in a transaction and commits it, then publishes its
// notifications. fn queues statements (and may flush to read results before
// queueing more); anything fn returns as an error rolls the transaction back
// and is returned, mapped to the store's sentinels. A deadlock or a
// serialization failure runs fn again in a new transaction, so fn must set,
// not accumulate, anything it reports.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, t *txn) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		notes, err := s.writeOnce(ctx, fn)
		if err == nil {
			s.publish(notes, nil)
			return nil
		}
		if attempt < maxWriteAttempts && retryable(err) && ctx.Err() == nil {
			continue
		}
		return s.mapErr(err)
	}
}

// publish hands committed notifications to this process's subscribers and
// queues them for other nodes'. Writers publish before answering: a caller
// that subscribed first has its notification by the time its call returns.
// Other nodes hear it a moment later, from the notifier.
func (s *Store) publish(notes, later []store.Notification) {
	for _, n := range notes {
		s.hub.Publish(n)
	}
	for _, n := range later {
		s.hub.Publish(n)
	}
	s.notifier.add(notes, later)
}

func (s *Store) writeOnce(ctx context.Context, fn func(ctx context.Context, t *txn) error) (notes []store.Notification, err error) {
	t := &txn{s: s}
	defer func() {
		if err != nil && t.tx != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			if rbErr := t.tx.Rollback(rctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
				s.log.Warn("postgres rollback failed", "err", rbErr)
			}
		}
	}()
	if err := fn(ctx, t); err != nil {
		return nil, err
	}
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	if t.tx == nil {
		return t.notes, nil
	}
	if err := t.tx.Commit(ctx); err != nil {
		return nil, err
	}
	return t.notes, nil
}

// query runs a read and calls scan for each row.
func (s *Store) query(ctx context.Context, scan func(pgx.Rows) error, sql string, args ...any) error {
	return s.queryOn(ctx, s.pool, scan, sql, args...)
}

// queryOn is query on the connections of pool.
func (s *Store) queryOn(ctx context.Context, pool *pgxpool.Pool, scan func(pgx.Rows) error, sql string, args ...any) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return s.mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return s.mapErr(err)
		}
	}
	return s.mapErr(rows.Err())
}

// queryRow runs a single-row read and scans it; store.ErrNotFound if there
// is no row.
func (s *Store) queryRow(ctx context.Context, scan func(pgx.Row) error, sql string, args ...any) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	return s.mapErr(scan(s.pool.QueryRow(ctx, sql, args...)))
}

// exec runs one statement on its own (autocommit) and returns the number of
// rows it changed.
func (s *Store) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	ct, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return 0, s.mapErr(err)
	}
	return ct.RowsAffected(), nil
}

// sessionExists tells an empty list of a session's rows from an unknown
// session (store.ErrNotFound).
func (s *Store) sessionExists(ctx context.Context, id string) error {
	err := s.queryRow(ctx, func(row pgx.Row) error {
		var one int
		return row.Scan(&one)
	}, `SELECT 1 FROM sessions WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	return nil
}
