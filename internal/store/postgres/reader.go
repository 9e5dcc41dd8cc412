package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// sessionReader serves SessionGet as the committer serves appends: up to a
// few groups at once (grouper.go), each reading in one statement (id = ANY)
// the sessions asked for while the others were busy. A running session reads its row at every safe point
// of every step, so with many sessions at once most round trips were these
// reads; combined, they cost one round trip (and one wake-up of a server
// process) per group. Each read still sees every commit made before it was
// asked: the statement starts after every read it serves was queued.
type sessionReader struct {
	s      *Store
	groups *grouper[*sessionRead]
}

// maxReadGroup bounds the ids of one read.
const maxReadGroup = 256

type sessionRead struct {
	id   string
	row  *store.SessionRow
	err  error
	done chan struct{}
}

func newSessionReader(s *Store, workers int) *sessionReader {
	r := &sessionReader{s: s}
	r.groups = newGrouper(workers, maxReadGroup, r.read)
	return r
}

func (r *sessionReader) stop() { r.groups.stop() }

// get reads session id; store.ErrNotFound if there is none.
func (r *sessionReader) get(ctx context.Context, id string) (*store.SessionRow, error) {
	q := &sessionRead{id: id, done: make(chan struct{})}
	if err := r.groups.add(q); err != nil {
		return nil, err
	}
	select {
	case <-q.done:
		return q.row, q.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// read answers a group with one statement.
func (r *sessionReader) read(group []*sessionRead) {
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	ids := make([]string, 0, len(group))
	for _, q := range group {
		ids = append(ids, q.id)
	}
	found := make(map[string]*store.SessionRow, len(group))
	sql, arg := byIDs(`SELECT `+sessionColumns+` FROM sessions`, ids)
	err := r.s.query(ctx, func(rows pgx.Rows) error {
		row, err := scanSession(rows)
		if err != nil {
			return err
		}
		found[row.ID] = row
		return nil
	}, sql, arg)
	handed := make(map[string]bool, len(group))
	for _, q := range group {
		switch row, ok := found[q.id]; {
		case err != nil:
			q.err = err
		case !ok:
			q.err = store.ErrNotFound
		case handed[q.id]:
			// Several readers of one session each get a row of their own.
			c := *row
			c.Spec, c.State = slices.Clone(row.Spec), slices.Clone(row.State)
			if row.WakeAt != nil {
				w := *row.WakeAt
				c.WakeAt = &w
			}
			q.row = &c
		default:
			handed[q.id] = true
			q.row = row
		}
		close(q.done)
	}
}

// seqReader serves SessionLastSeq as sessionReader serves SessionGet: the
// last seqs asked for at the same time are read in one statement. It reads
// an index entry's row, never a session's state or spec, which are large
// (and stored out of line once they are).
type seqReader struct {
	s      *Store
	groups *grouper[*seqRead]
}

type seqRead struct {
	id   string
	seq  int64
	err  error
	done chan struct{}
}

func newSeqReader(s *Store, workers int) *seqReader {
	r := &seqReader{s: s}
	r.groups = newGrouper(workers, maxReadGroup, r.read)
	return r
}

func (r *seqReader) stop() { r.groups.stop() }

// get reads session id's last seq; store.ErrNotFound if there is none.
func (r *seqReader) get(ctx context.Context, id string) (int64, error) {
	q := &seqRead{id: id, done: make(chan struct{})}
	if err := r.groups.add(q); err != nil {
		return 0, err
	}
	select {
	case <-q.done:
		return q.seq, q.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// read answers a group with one statement.
func (r *seqReader) read(group []*seqRead) {
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	ids := make([]string, 0, len(group))
	for _, q := range group {
		ids = append(ids, q.id)
	}
	found := make(map[string]int64, len(group))
	sql, arg := byIDs(`SELECT id, last_seq FROM sessions`, ids)
	err := r.s.query(ctx, func(rows pgx.Rows) error {
		var (
			id  string
			seq int64
		)
		if err := rows.Scan(&id, &seq); err != nil {
			return err
		}
		found[id] = seq
		return nil
	}, sql, arg)
	for _, q := range group {
		switch seq, ok := found[q.id]; {
		case err != nil:
			q.err = err
		case !ok:
			q.err = store.ErrNotFound
		default:
			q.seq = seq
		}
		close(q.done)
	}
}

// byIDs completes a read of the sessions of ids: one id is read with
// "id = $1", whose prepared statement PostgreSQL plans once, while "id =
// ANY($1)" is planned again at every run (its generic plan, for an array of
// unknown length, never looks cheaper than a custom one), which cost more
// than the read itself. Serially, every group holds one id.
func byIDs(sql string, ids []string) (string, any) {
	if len(ids) == 1 {
		return sql + ` WHERE id = $1`, ids[0]
	}
	return sql + ` WHERE id = ANY($1)`, ids
}
