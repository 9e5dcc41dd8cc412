package postgres

import (
	"context"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// sessionReader serves SessionGet as the committer serves appends: a few
// goroutines, each reading in one statement (id = ANY) the sessions asked
// for while it was busy. A running session reads its row at every safe point
// of every step, so with many sessions at once most round trips were these
// reads; combined, they cost one round trip (and one wake-up of a server
// process) per group. Each read still sees every commit made before it was
// asked: the statement starts after every read it serves was queued.
type sessionReader struct {
	s     *Store
	queue chan *sessionRead
	// mu orders reads before stop, as the committer's does.
	mu      sync.RWMutex
	stopped bool
	wg      sync.WaitGroup
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
	r := &sessionReader{s: s, queue: make(chan *sessionRead, queuedWrites)}
	for range workers {
		r.wg.Go(r.run)
	}
	return r
}

func (r *sessionReader) stop() {
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.queue)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// get reads session id; store.ErrNotFound if there is none.
func (r *sessionReader) get(ctx context.Context, id string) (*store.SessionRow, error) {
	q := &sessionRead{id: id, done: make(chan struct{})}
	r.mu.RLock()
	if r.stopped {
		r.mu.RUnlock()
		return nil, store.ErrClosed
	}
	select {
	case r.queue <- q:
	case <-ctx.Done():
		r.mu.RUnlock()
		return nil, ctx.Err()
	}
	r.mu.RUnlock()
	select {
	case <-q.done:
		return q.row, q.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *sessionReader) run() {
	for first := range r.queue {
		group := []*sessionRead{first}
	fill:
		for len(group) < maxReadGroup {
			select {
			case q, ok := <-r.queue:
				if !ok {
					break fill
				}
				group = append(group, q)
			default:
				break fill
			}
		}
		r.read(group)
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
	err := r.s.query(ctx, func(rows pgx.Rows) error {
		row, err := scanSession(rows)
		if err != nil {
			return err
		}
		found[row.ID] = row
		return nil
	}, `SELECT `+sessionColumns+` FROM sessions WHERE id = ANY($1)`, ids)
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
