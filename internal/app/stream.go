package app

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// streamPage is how many events a stream reads per ListEvents call.
const streamPage = 500

// openedKey carries a stream's opened callback (WithOpened).
type openedKey struct{}

// WithOpened returns a context whose streams (StreamEvents,
// StreamTreeEvents) call opened once they are open: the request checked
// (the session exists, a cursor is of its tree, the tree is within
// engine.MaxTreeSessions) and every journal watched, before the first
// event is yielded and before the stream first waits. An error the
// request caused comes before it, as the stream's only value; so a
// transport that must answer with a status before the first event (HTTP's
// 200 of an event stream, or a 404) knows when to, even when no event
// comes for a long time. Like net/http/httptrace's hooks, it travels in
// the context because only a transport needs it, and it changes nothing
// of what the stream yields.
//
// opened runs at most once, however often the stream reports it: a
// callback that closes a channel can be given as is.
func WithOpened(ctx context.Context, opened func()) context.Context {
	if opened == nil {
		return ctx
	}
	return context.WithValue(ctx, openedKey{}, sync.OnceFunc(opened))
}

// markOpened calls the opened callback of ctx, if any.
func markOpened(ctx context.Context) {
	if f, _ := ctx.Value(openedKey{}).(func()); f != nil {
		f()
	}
}

// caughtUpKey carries a stream's caught-up hook (WithCaughtUp).
type caughtUpKey struct{}

// caughtUpHook is WithCaughtUp's callback, and whether a stream took it.
type caughtUpHook struct {
	caughtUp func()
	taken    atomic.Bool
}

// WithCaughtUp returns a context whose streams (StreamEvents,
// StreamTreeEvents) call caughtUp each time they have yielded every value
// they have and are about to wait for more, in the goroutine that ranges
// over them. A transport may then hold what they yield and send it all at
// caughtUp: one write for a burst of events, not one per event, and none
// held while the stream waits. taken reports whether the stream promised
// to call it (it does once it starts): a stream that does not know the
// hook never calls it, and its values must then be sent as they come.
// Like WithOpened, it changes nothing of what the stream yields.
func WithCaughtUp(ctx context.Context, caughtUp func()) (_ context.Context, taken func() bool) {
	h := &caughtUpHook{caughtUp: caughtUp}
	return context.WithValue(ctx, caughtUpKey{}, h), h.taken.Load
}

// takeCaughtUp returns the caught-up callback of ctx (a no-op when there
// is none), promising the consumer to call it before every wait.
func takeCaughtUp(ctx context.Context) func() {
	h, _ := ctx.Value(caughtUpKey{}).(*caughtUpHook)
	if h == nil {
		return func() {}
	}
	h.taken.Store(true)
	return h.caughtUp
}

// StreamEvents yields the session's events with seq > after, in order,
// each exactly once, then each new one as the journal grows: it watches
// the journal before it reads it, so nothing appended in between is
// missed, reads again whenever the watch says the journal grew, and also
// on a poll, in case a notice was lost. The streams of one session share
// one watch and the session's latest events (streamtail.go). It ends
// without an error when ctx ends or the engine stops (the watch closes); a
// failed read, or a gap in the journal (sending past it would lose an
// event for good), is its last value.
func (t *Trees) StreamEvents(ctx context.Context, sessionID string, after int64) iter.Seq2[lt.Event, error] {
	return func(yield func(lt.Event, error) bool) {
		if after < 0 {
			yield(lt.Event{}, apierror.Invalid("after", "after must be 0 or more, got %d", after))
			return
		}
		// Watch first: an event appended after the first read but before
		// the watch would otherwise wait for the next event or poll. Every
		// event appended once view is loaded announces a newer view.
		feed := t.feeds.acquire(t.src, sessionID)
		defer t.feeds.release(sessionID, feed)
		view := feed.view.Load()
		// want is the seq the last notice announced, which the shared
		// tail may already hold; 0 (a first read, a poll) reads the store.
		var want int64
		list := func(after int64) ([]lt.Event, error) {
			if evs := feed.view.Load().covering(after, want); evs != nil {
				return evs, nil
			}
			evs, err := t.src.ListEvents(ctx, sessionID, after, streamPage)
			if err != nil {
				return nil, err
			}
			feed.keep(evs)
			return evs, nil
		}
		// The first read also finds an unknown session (a 404) before the
		// stream opens.
		events, err := list(after)
		if err != nil {
			yield(lt.Event{}, err)
			return
		}
		caughtUp := takeCaughtUp(ctx)
		markOpened(ctx)
		poll, stopPoll := t.newPoll()
		defer stopPoll()
		for {
			var ok bool
			if after, ok = drain(ctx, after, events, yield, list); !ok {
				return
			}
			caughtUp()
		wait:
			for {
				select {
				case <-ctx.Done():
					return
				case <-view.changed:
					if view = feed.view.Load(); view.closed {
						return // the engine is stopping; the caller resumes later
					}
					if view.announced > after {
						want = view.announced
						// What is new, at once from the tail when it has it.
						events = view.covering(after, want)
						break wait
					}
				case <-poll:
					want, events = 0, nil
					break wait // read anyway: a notice may have been lost
				}
			}
		}
	}
}

// drain yields events, then reads (with list) and yields pages after the
// last seq yielded until a page comes back short (the stream has caught up). A seq
// at or below after is skipped (never repeated). It returns the last seq
// yielded, and false when the stream is over: the consumer stopped, ctx
// ended, or a read failed or found a gap (yielded as the last value).
func drain(ctx context.Context, after int64, events []lt.Event, yield func(lt.Event, error) bool,
	list func(after int64) ([]lt.Event, error)) (int64, bool) {
	for {
		if events == nil {
			var err error
			if events, err = list(after); err != nil {
				if ctx.Err() == nil {
					yield(lt.Event{}, fmt.Errorf("list events after %d: %w", after, err))
				}
				return after, false
			}
		}
		for i := range events {
			ev := events[i]
			if ev.Seq <= after {
				continue
			}
			if ev.Seq != after+1 {
				yield(lt.Event{}, fmt.Errorf("journal gap: seq %d follows %d", ev.Seq, after))
				return after, false
			}
			if !yield(ev, nil) {
				return after, false
			}
			after = ev.Seq
		}
		if len(events) < streamPage {
			return after, true
		}
		events = nil
	}
}
