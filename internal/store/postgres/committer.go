package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// The hot writes (appends and session creations) go through a committer:
// up to a few groups at once (storeutil.Grouper), each the writes queued while the
// others were busy, sent on one pooled connection as one batch. PostgreSQL runs a batch's
// statements (up to its one Sync) as one implicit transaction, so a group
// costs one round trip, no BEGIN or COMMIT, and one WAL flush however many
// writes it holds: serially an append is one round trip, and under load
// concurrent sessions share commits, as the SQLite driver's writer makes
// them share fsyncs.
//
// A group commits whole or not at all, while each write must succeed or
// fail on its own. So no statement of a grouped write may fail on the
// client's side after the database accepted it: every condition is checked
// inside the database (see checkedSQL), and an error aborts the group.
// The committer then sends the group again without the write that failed,
// and runs that one alone, in its own transaction, where its error is its
// own; an error it cannot attribute to one write makes it run each alone.
// Nothing of an aborted group was kept, so running a write again is safe.

const (
	// maxGroup bounds the writes in one transaction: a larger group would
	// hold its row locks longer and delay its first writer more than a
	// commit costs.
	maxGroup = 64
	// queuedWrites is how many writes may wait for a committer before
	// callers block.
	queuedWrites = 1024
	// sendTimeout bounds one group's round trip: its writes run to the end
	// even when their callers stop waiting, but not forever on a database
	// that stopped answering.
	sendTimeout = 2 * time.Minute
)

// request is one write queued for the committer.
type request struct {
	// ctx is the caller's: a write whose caller gave up before the
	// committer took it is dropped.
	ctx context.Context
	// build queues the write's statements on t, which it must not flush
	// (the group is one batch); it runs again for each send, as a batch's
	// queued queries belong to the connection that ran them.
	build func(t *txn)
	// notes and later are the notifications the last build queued
	// (txn.notify, txn.notifyLater), published once the write committed.
	notes, later []store.Notification
	done         chan error
}

// committer runs the queued writes in groups; see above.
type committer struct {
	s      *Store
	groups *storeutil.Grouper[*request]
}

func newCommitter(s *Store, workers int) *committer {
	c := &committer{s: s}
	c.groups = storeutil.NewGrouper(workers, maxGroup, c.commit)
	return c
}

// stop runs the writes already queued, then ends the committer's goroutines.
func (c *committer) stop() { c.groups.Stop() }

// submit queues a write and waits for its outcome. If ctx ends first, the
// write may still commit (as when a connection drops during COMMIT); the
// caller learns only that it does not know.
func (c *committer) submit(ctx context.Context, build func(t *txn)) error {
	// A caller that gave up before its write was sent writes nothing.
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request{ctx: ctx, build: build, done: make(chan error, 1)}
	if err := c.groups.Add(r); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commit runs a group and answers each of its writes.
func (c *committer) commit(group []*request) {
	group = slices.DeleteFunc(group, func(r *request) bool {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			return true
		}
		return false
	})
	if len(group) == 0 {
		return
	}
	// The writes were accepted: they run to the end even if their callers
	// stop waiting, so a write's outcome never depends on which other
	// callers gave up.
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	var alone []*request
	for len(group) > 1 {
		failed, err := c.send(ctx, group)
		if err == nil {
			c.done(group, nil)
			group = nil
			break
		}
		if failed < 0 {
			// Not any one write's fault (the connection, the commit): run
			// each on its own.
			alone = append(alone, group...)
			group = nil
			break
		}
		alone = append(alone, group[failed])
		group = append(group[:failed:failed], group[failed+1:]...)
	}
	alone = append(alone, group...)
	for _, r := range alone {
		c.done([]*request{r}, c.sendAlone(ctx, r))
	}
}

// sendAlone runs one write in its own transaction, again if PostgreSQL
// aborted it as a deadlock or a serialization failure.
func (c *committer) sendAlone(ctx context.Context, r *request) error {
	for attempt := 1; ; attempt++ {
		_, err := c.send(ctx, []*request{r})
		if err == nil || attempt >= maxWriteAttempts || !retryable(err) {
			return err
		}
	}
}

// send runs the group's writes in one batch, one implicit transaction, and
// returns the index of the write whose statement failed (-1 if the failure
// is not one statement's).
func (c *committer) send(ctx context.Context, group []*request) (failed int, err error) {
	b := &pgx.Batch{}
	failed = -1
	for i, r := range group {
		t := &txn{s: c.s, b: b}
		from := len(b.QueuedQueries)
		r.build(t)
		r.notes, r.later = t.notes, t.later
		for _, qq := range b.QueuedQueries[from:] {
			blame(qq, func() { failed = i })
		}
	}
	if len(b.QueuedQueries) == 0 {
		return -1, nil
	}
	err = c.s.hot.SendBatch(ctx, b).Close()
	if err == nil {
		failed = -1
	}
	return failed, err
}

// blame calls fail when qq's statement (or its callback) fails.
func blame(qq *pgx.QueuedQuery, fail func()) {
	fn := qq.Fn
	qq.Fn = func(br pgx.BatchResults) error {
		var err error
		if fn != nil {
			err = fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			fail()
		}
		return err
	}
}

// done publishes the notifications of the writes that committed and answers
// their callers.
func (c *committer) done(group []*request, err error) {
	for _, r := range group {
		if err == nil {
			c.s.publish(r.notes, r.later)
		}
		r.done <- err
	}
}

// codeDivisionByZero is what checkedSQL raises when its statement changed
// no row.
const codeDivisionByZero = "22012"

// checkedSQL makes a data-modifying statement fail inside the database when
// it changes no row (a division by zero, the one error plain SQL can raise
// at run time), so the transaction it is part of aborts there: a batch
// commits at its end whatever its callbacks think. dml must not have a
// RETURNING clause.
func checkedSQL(dml string) string {
	return `WITH changed AS (` + dml + `
RETURNING 1) SELECT 1 / count(*) FROM changed`
}

// onNoRow makes the failure of qq, a checkedSQL statement, for having
// changed no row the error refuse returns.
func onNoRow(qq *pgx.QueuedQuery, refuse func() error) {
	qq.Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == codeDivisionByZero {
			return refuse()
		}
		return err
	}
}
