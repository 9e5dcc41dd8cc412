package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// idReader serves a read of one session by id (SessionGet, SessionLastSeq)
// as the committer serves appends: up to a few groups at once (storeutil.Grouper),
// each reading in one statement the sessions asked for while the others
// were busy. A running session reads its last seq at every safe point of
// every step, so with many sessions at once most round trips were these
// reads; combined, they cost one round trip (and one wake-up of a server
// process) per group. Each read still sees every commit made before it was
// asked: the statement starts after every read it serves was queued.
type idReader[T any] struct {
	s      *Store
	groups *storeutil.Grouper[*idRead[T]]
	// columns are what the statement selects, id first; scan reads one
	// row of them.
	columns string
	scan    func(pgx.Rows) (id string, v T, err error)
	// clone gives each further reader of one id a value of its own (nil:
	// T is a plain value).
	clone func(T) T
}

// maxReadGroup bounds the ids of one read.
const maxReadGroup = 256

type idRead[T any] struct {
	id   string
	v    T
	err  error
	done chan struct{}
}

func newIDReader[T any](s *Store, workers int, columns string, scan func(pgx.Rows) (string, T, error), clone func(T) T) *idReader[T] {
	r := &idReader[T]{s: s, columns: columns, scan: scan, clone: clone}
	r.groups = storeutil.NewGrouper(workers, maxReadGroup, r.read)
	return r
}

// newSessionReader serves SessionGet: whole rows.
func newSessionReader(s *Store, workers int) *idReader[*store.SessionRow] {
	return newIDReader(s, workers, sessionColumns, func(rows pgx.Rows) (string, *store.SessionRow, error) {
		row, err := scanSession(rows)
		if err != nil {
			return "", nil, err
		}
		return row.ID, row, nil
	}, func(row *store.SessionRow) *store.SessionRow {
		c := *row
		c.Spec, c.State = slices.Clone(row.Spec), slices.Clone(row.State)
		if row.WakeAt != nil {
			w := *row.WakeAt
			c.WakeAt = &w
		}
		return &c
	})
}

// newSeqReader serves SessionLastSeq: it reads no session's state or spec,
// which are large (and stored out of line once they are).
func newSeqReader(s *Store, workers int) *idReader[int64] {
	return newIDReader(s, workers, "id, last_seq", func(rows pgx.Rows) (string, int64, error) {
		var (
			id  string
			seq int64
		)
		err := rows.Scan(&id, &seq)
		return id, seq, err
	}, nil)
}

func (r *idReader[T]) stop() { r.groups.Stop() }

// get reads session id; store.ErrNotFound if there is none.
func (r *idReader[T]) get(ctx context.Context, id string) (T, error) {
	var zero T
	q := &idRead[T]{id: id, done: make(chan struct{})}
	if err := r.groups.Add(q); err != nil {
		return zero, err
	}
	select {
	case <-q.done:
		return q.v, q.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// read answers a group with one statement.
func (r *idReader[T]) read(group []*idRead[T]) {
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	ids := make([]string, 0, len(group))
	for _, q := range group {
		ids = append(ids, q.id)
	}
	found := make(map[string]T, len(group))
	sql, arg := byIDs(`SELECT `+r.columns+` FROM sessions`, ids)
	err := r.s.queryOn(ctx, r.s.hot, func(rows pgx.Rows) error {
		id, v, err := r.scan(rows)
		if err != nil {
			return err
		}
		found[id] = v
		return nil
	}, sql, arg)
	handed := make(map[string]bool, len(group))
	for _, q := range group {
		switch v, ok := found[q.id]; {
		case err != nil:
			q.err = err
		case !ok:
			q.err = store.ErrNotFound
		case handed[q.id] && r.clone != nil:
			// Several readers of one session each get a value of their own.
			q.v = r.clone(v)
		default:
			handed[q.id] = true
			q.v = v
		}
		close(q.done)
	}
}

// byIDs completes a read of the sessions of ids: one id is read with
// "id = $1", an index scan, and several with "id = ANY($1)". Without the
// hot connections' generic plans (hotPoolConfig), the latter was planned
// again at every run (its generic plan, for an array of unknown length,
// never looks cheaper than a custom one), which cost more than the read
// itself. Serially, every group holds one id.
func byIDs(sql string, ids []string) (string, any) {
	if len(ids) == 1 {
		return sql + ` WHERE id = $1`, ids[0]
	}
	return sql + ` WHERE id = ANY($1)`, ids
}
