package app

import (
	"context"
	"slices"
	"sync"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Many streams often follow one session (a team's dashboards, a CI job's
// log, the web UI in several tabs). Each is told when the journal grows
// and reads what is new; read one by one, a thousand streams would make a
// thousand identical store reads per event. The streams of a session
// share its tail instead: the first to read what a notice announced keeps
// it, and the others take it from there. The journal is append-only, so
// an event kept is never stale: the tail is only ever short, and a stream
// reads the store whenever the tail does not reach the seq it was told
// of (or it has none to reach: its first read and its polls).

// tailKeep and tailKeepBytes bound a session's tail: its latest events,
// at most tailKeep of them and about tailKeepBytes of payload (an event's
// payload may reach the engine's blob threshold, 64 KiB by default). A
// stream behind them reads the store, as it would without the tail.
const (
	tailKeep      = 1024
	tailKeepBytes = 4 << 20
)

// tails holds the tails of the sessions that streams follow, each while
// at least one does.
type tails struct {
	mu sync.Mutex
	m  map[string]*sessionTail
}

// sessionTail is a session's latest events, with contiguous seqs.
type sessionTail struct {
	streams int // the streams holding it; under tails.mu

	mu     sync.RWMutex
	events []lt.Event
}

// acquire returns the session's tail, for a stream of it to release.
func (t *tails) acquire(sessionID string) *sessionTail {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*sessionTail{}
	}
	st := t.m[sessionID]
	if st == nil {
		st = &sessionTail{}
		t.m[sessionID] = st
	}
	st.streams++
	return st
}

// release lets go of a tail acquired: the last stream's release drops it.
func (t *tails) release(sessionID string, st *sessionTail) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st.streams--; st.streams == 0 {
		delete(t.m, sessionID)
	}
}

// list returns up to streamPage events with seq > after: from the tail
// when it holds every one up to want (want > after), else from src, whose
// answer the tail then keeps. The events returned are shared: read them,
// never change them. The streams told of an event read the store one at a
// time, so that of many only the first reads it, and the others find it
// in the tail (served under a shared lock, so a thousand do not queue). A
// read with nothing to reach (want <= after: a stream's first read, a
// poll) cannot be served by the tail and does not wait for the others.
func (st *sessionTail) list(ctx context.Context, src Journals, sessionID string, after, want int64) ([]lt.Event, error) {
	if want <= after {
		evs, err := src.ListEvents(ctx, sessionID, after, streamPage)
		if err != nil {
			return nil, err
		}
		st.mu.Lock()
		st.keep(evs)
		st.mu.Unlock()
		return evs, nil
	}
	st.mu.RLock()
	evs := st.covering(after, want)
	st.mu.RUnlock()
	if evs != nil {
		return evs, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// Another stream may have read what this one wants while it waited.
	if evs := st.covering(after, want); evs != nil {
		return evs, nil
	}
	evs, err := src.ListEvents(ctx, sessionID, after, streamPage)
	if err != nil {
		return nil, err
	}
	st.keep(evs)
	return evs, nil
}

// covering returns the tail's events after `after` (at most streamPage)
// when the tail holds every event from after+1 to want, else nil.
func (st *sessionTail) covering(after, want int64) []lt.Event {
	n := len(st.events)
	if n == 0 || after+1 < st.events[0].Seq || st.events[n-1].Seq < want {
		return nil
	}
	i := int(after + 1 - st.events[0].Seq)
	end := min(n, i+streamPage)
	return st.events[i:end:end]
}

// keep adds events read from the journal to the tail: joined to it when
// they continue it, else in its place (a stream far behind the others
// moves the tail back; the others' next read moves it forward again).
// A new array every time: the events handed out stay as they were.
func (st *sessionTail) keep(evs []lt.Event) {
	if len(evs) == 0 || !contiguous(evs) {
		return
	}
	n := len(st.events)
	if n > 0 && evs[0].Seq >= st.events[0].Seq && evs[len(evs)-1].Seq <= st.events[n-1].Seq {
		return // held already (a read that started before the tail's last one)
	}
	if n > 0 && evs[0].Seq >= st.events[0].Seq && evs[0].Seq <= st.events[n-1].Seq+1 {
		st.events = slices.Concat(st.events[:evs[0].Seq-st.events[0].Seq], evs)
	} else {
		st.events = slices.Clone(evs)
	}
	if over := len(st.events) - tailKeep; over > 0 {
		st.events = st.events[over:]
	}
	// The newest events are kept, and at least one, whatever its size.
	size := 0
	for i := len(st.events) - 1; i >= 0; i-- {
		if size += len(st.events[i].Data); size > tailKeepBytes && i < len(st.events)-1 {
			st.events = st.events[i+1:]
			break
		}
	}
}

// contiguous reports whether evs' seqs follow one another (a journal's
// page does; a gap is the stream's to report, never the tail's to keep).
func contiguous(evs []lt.Event) bool {
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			return false
		}
	}
	return true
}
