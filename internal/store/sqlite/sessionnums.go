package sqlite

// sessionNums holds the numbers of the sessions the writer appended to
// (021_journal_positions), so that an append finds its session's number
// without its UPDATE returning it: SQLite gathers a RETURNING's rows in a
// temporary b-tree it opens for the statement, which made the UPDATE of a
// session's row take 34 µs rather than 18 (measured alone with the driver).
//
// A number never changes once its session's row is written
// (029_session_numbers_fixed refuses it), so an entry is never stale. It is
// kept only once the transaction it was read in commits, and forgotten if
// the request that read it is rolled back to its savepoint: a session
// created there and taken back may be created again with another number.
// A raw request (a migration, a test) may write anything, so the table is
// emptied after one. Only the writer's goroutine (the one running the
// batch) uses it.
type sessionNums struct {
	known   map[string]int64
	pending map[string]int64 // read in the open transaction
}

// maxSessionNums bounds the table: past it, it is emptied (and refilled by
// appends), so a long-lived node holds no entry per session it ever ran.
const maxSessionNums = 1 << 16

func newSessionNums() *sessionNums {
	return &sessionNums{known: make(map[string]int64), pending: make(map[string]int64)}
}

// get returns the number of session id if it is known.
func (t *sessionNums) get(id string) (int64, bool) {
	if n, ok := t.known[id]; ok {
		return n, true
	}
	n, ok := t.pending[id]
	return n, ok
}

// read records a number read in the open transaction.
func (t *sessionNums) read(id string, num int64) { t.pending[id] = num }

// committed keeps the numbers read in the transaction that just committed.
func (t *sessionNums) committed() {
	if len(t.pending) == 0 {
		return
	}
	if len(t.known)+len(t.pending) > maxSessionNums {
		clear(t.known)
	}
	for id, n := range t.pending {
		t.known[id] = n
	}
	clear(t.pending)
}

// rolledBack forgets the numbers read in the open transaction, which
// ended without committing or was rolled back to a savepoint (those read
// before the savepoint are only read again).
func (t *sessionNums) rolledBack() { clear(t.pending) }

// forget empties the table.
func (t *sessionNums) forget() {
	clear(t.known)
	clear(t.pending)
}

// sessionNum returns the number of session id, read in the open
// transaction if it is not known; sql.ErrNoRows if there is no such
// session.
func (w *writer) sessionNum(id string) (int64, error) {
	if n, ok := w.nums.get(id); ok {
		return n, nil
	}
	var n int64
	if err := w.queryRow(`SELECT num FROM sessions WHERE id = ?`, id).Scan(&n); err != nil {
		return 0, err
	}
	w.nums.read(id, n)
	return n, nil
}
