package app

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Many streams often follow one session (a team's dashboards, a CI job's
// log, the web UI in several tabs). Each watching the journal and reading
// what is new for itself, a thousand streams would make a thousand
// identical store reads per event, and the engine would wake a thousand
// watchers one by one for each. The streams of a session share a feed
// instead: one watch of the journal and one reader, which keeps the
// session's latest events (its tail) and, once it holds what a notice
// announced, wakes every stream at once by closing a channel. A stream
// woken takes what is new from the tail, in memory and without a lock, all
// of it at once (a burst of events is one batch, not one wake-up per
// event). The journal is append-only, so an event kept is never stale.
// A stream reads the store itself whenever the tail does not reach back
// to its position (it is far behind, or the feed's read failed) and on
// its first read and its polls; what it reads joins the tail when it
// continues it.

// tailKeep and tailKeepBytes bound a session's tail: its latest events,
// at most tailKeep of them and about tailKeepBytes of payload (an event's
// payload may reach the engine's blob threshold, 64 KiB by default). A
// stream behind them reads the store, as it would without the tail.
const (
	tailKeep      = 1024
	tailKeepBytes = 4 << 20
)

// feeds holds the feeds of the sessions that streams follow, each while
// at least one does.
type feeds struct {
	mu sync.Mutex
	m  map[string]*feed
	// keepEvents is the tail's bound in events: tailKeep, unless a test
	// set a smaller one (to outgrow it in a few turns) before the first
	// stream.
	keepEvents int
}

// feed is one session's shared watch and tail.
type feed struct {
	streams    int // the streams holding it; under feeds.mu
	keepEvents int // the tail's bound in events (feeds.keepEvents)
	stop       func()
	ended      chan struct{} // closed when the feed's goroutine has returned

	mu   sync.Mutex // serializes the publishers of view
	view atomic.Pointer[feedView]
}

// feedView is what a feed knows at one moment. It never changes once
// published: streams read it without a lock.
type feedView struct {
	events []lt.Event // the tail: contiguous seqs, the newest kept
	// announced is the newest seq the watch told of; the feed has read
	// up to it (into events) unless its read failed.
	announced int64
	// closed: the watch closed (the engine is stopping).
	closed bool
	// changed is closed when a view with a newer announced (or closed)
	// is published: a stream waits on it for what is new.
	changed chan struct{}
}

// acquire returns the session's feed, started if new (its watch is on
// before acquire returns), for a stream of it to release.
func (fs *feeds) acquire(src Journals, sessionID string) *feed {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m == nil {
		fs.m = map[string]*feed{}
	}
	f := fs.m[sessionID]
	if f == nil {
		keep := fs.keepEvents
		if keep <= 0 {
			keep = tailKeep
		}
		f = startFeed(src, sessionID, keep, func(f *feed) { fs.forget(sessionID, f) })
		fs.m[sessionID] = f
	}
	f.streams++
	return f
}

// release lets go of a feed acquired: the last stream's release stops it,
// and returns once its goroutine has.
func (fs *feeds) release(sessionID string, f *feed) {
	fs.mu.Lock()
	last := false
	if f.streams--; f.streams == 0 {
		last = true
		if fs.m[sessionID] == f {
			delete(fs.m, sessionID)
		}
	}
	fs.mu.Unlock()
	if last {
		f.stop()
		<-f.ended
	}
}

// forget drops a feed whose watch closed, so that a stream that comes
// later starts a new one (with a new watch) rather than ending at once.
func (fs *feeds) forget(sessionID string, f *feed) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m[sessionID] == f {
		delete(fs.m, sessionID)
	}
}

// startFeed watches the session's journal and starts the goroutine that
// reads what each notice announces. The feed reads with a context of its
// own, not a stream's: it serves every stream of the session, and the
// last one's release ends it.
func startFeed(src Journals, sessionID string, keepEvents int, forget func(*feed)) *feed {
	ctx, cancel := context.WithCancel(context.Background())
	updates, stopWatch := src.WatchSession(ctx, sessionID)
	f := &feed{ended: make(chan struct{}), keepEvents: keepEvents}
	f.view.Store(&feedView{changed: make(chan struct{})})
	f.stop = func() {
		stopWatch()
		cancel()
	}
	go func() {
		defer close(f.ended)
		for {
			select {
			case <-ctx.Done():
				return
			case seq, open := <-updates:
				if !open {
					forget(f)
					f.publish(func(v *feedView) { v.closed = true })
					return
				}
				f.catchUp(ctx, src, sessionID, seq)
			}
		}
	}()
	return f
}

// catchUp reads the events up to seq that the tail lacks, then announces
// seq to the streams. A failed read is not the feed's to report: the
// streams, finding the tail short of seq, read the store themselves and
// get the error (or, if it passed, the events).
func (f *feed) catchUp(ctx context.Context, src Journals, sessionID string, seq int64) {
	v := f.view.Load()
	if seq <= v.announced {
		return // a notice of what is announced already
	}
	after := v.last()
	if after == 0 || seq-after > int64(f.keepEvents) {
		// Nothing kept, or more new than the tail keeps: the newest only;
		// streams further behind read the store.
		after = max(0, seq-streamPage)
	}
	for after < seq && ctx.Err() == nil {
		evs, err := src.ListEvents(ctx, sessionID, after, streamPage)
		if err != nil || len(evs) == 0 {
			break
		}
		f.keep(evs)
		after = evs[len(evs)-1].Seq
		if len(evs) < streamPage {
			break
		}
	}
	f.publish(func(v *feedView) { v.announced = max(v.announced, seq) })
}

// publish makes the view that change makes of the current one the feed's
// view; when it announces more (or closes), the streams waiting are woken.
func (f *feed) publish(change func(*feedView)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.view.Load()
	v := *old
	change(&v)
	wake := v.announced != old.announced || v.closed != old.closed
	if wake {
		v.changed = make(chan struct{})
	}
	f.view.Store(&v)
	if wake {
		close(old.changed)
	}
}

// keep adds events read from the journal to the tail: joined to it when
// they continue it, in its place when they are all newer than it (a gap
// between), and not at all when they are older. A new array every time:
// the events handed out stay as they were. It wakes no stream (a stream's
// own read announces nothing new).
func (f *feed) keep(evs []lt.Event) {
	if len(evs) == 0 || !contiguous(evs) {
		return
	}
	f.publish(func(v *feedView) { v.events = keepTail(v.events, evs, f.keepEvents) })
}

// keepTail returns the tail that holding evs (contiguous) makes of tail,
// at most keepEvents of them.
func keepTail(tail, evs []lt.Event, keepEvents int) []lt.Event {
	n := len(tail)
	switch {
	case n > 0 && evs[len(evs)-1].Seq <= tail[n-1].Seq:
		return tail // held already, or older than the tail: the newest are kept
	case n > 0 && evs[0].Seq >= tail[0].Seq && evs[0].Seq <= tail[n-1].Seq+1:
		tail = slices.Concat(tail[:evs[0].Seq-tail[0].Seq], evs) // continues it
	default:
		tail = slices.Clone(evs) // newer, past a gap, or reaching past both of its ends
	}
	if over := len(tail) - keepEvents; over > 0 {
		tail = tail[over:]
	}
	// The newest events are kept, and at least one, whatever its size.
	size := 0
	for i := len(tail) - 1; i >= 0; i-- {
		if size += len(tail[i].Data); size > tailKeepBytes && i < len(tail)-1 {
			return tail[i+1:]
		}
	}
	return tail
}

// last is the seq of the newest event in the tail, 0 when it is empty.
func (v *feedView) last() int64 {
	if len(v.events) == 0 {
		return 0
	}
	return v.events[len(v.events)-1].Seq
}

// covering returns the tail's events after `after` (at most streamPage)
// when the tail holds every event from after+1 to want (want > after),
// else nil. The events are shared: read them, never change them.
func (v *feedView) covering(after, want int64) []lt.Event {
	n := len(v.events)
	if want <= after || n == 0 || after+1 < v.events[0].Seq || v.events[n-1].Seq < want {
		return nil
	}
	i := int(after + 1 - v.events[0].Seq)
	end := min(n, i+streamPage)
	return v.events[i:end:end]
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
