package sqlite

import "sync"

// lastSeqs holds the last seq of the sessions this store's writer appended
// to, so that SessionLastSeq, which every runner asks at every safe point,
// reads no row (a reader connection, a statement, a scan) while its
// answer is known here. It is exact because the writer is the database's
// only writer (one write connection; one process per data directory) and
// moves a session's seq here after the commit and before it answers the
// append's caller: a seq read after an append was acknowledged is at least
// that append's.
//
// A session not here is read from the database and kept. A read races with
// appends committed meanwhile: the value read may already be older than
// one the writer put here, so seqs here only ever grow (a session's seq
// only grows), and a read begun before the table was emptied is not kept.
type lastSeqs struct {
	mu    sync.Mutex
	seqs  map[string]int64
	epoch uint64 // moved whenever entries are dropped
}

// maxLastSeqs bounds the table: past it, it is emptied (and refilled by
// reads and appends), so a long-lived node holds no entry per session it
// ever ran.
const maxLastSeqs = 1 << 16

func newLastSeqs() *lastSeqs {
	return &lastSeqs{seqs: make(map[string]int64)}
}

// get returns the session's last seq if known, else the epoch to give
// fill along with the seq read from the database.
func (t *lastSeqs) get(id string) (seq int64, known bool, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seq, known = t.seqs[id]
	return seq, known, t.epoch
}

// fill keeps a seq read from the database, unless entries were dropped
// since the read began (epoch): an append committed meanwhile may have been
// dropped with them.
func (t *lastSeqs) fill(id string, seq int64, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.epoch == epoch {
		t.put(id, seq)
	}
}

// advance records a committed append (the writer calls it before it
// answers).
func (t *lastSeqs) advance(id string, seq int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.put(id, seq)
}

func (t *lastSeqs) put(id string, seq int64) {
	if cur, ok := t.seqs[id]; ok {
		t.seqs[id] = max(cur, seq)
		return
	}
	if len(t.seqs) >= maxLastSeqs {
		t.dropAll()
	}
	t.seqs[id] = seq
}

// forget drops every entry: after a write the table cannot follow (a raw
// request runs any SQL).
func (t *lastSeqs) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropAll()
}

func (t *lastSeqs) dropAll() {
	clear(t.seqs)
	t.epoch++
}
