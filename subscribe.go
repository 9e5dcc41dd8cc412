package longhaul

import (
	"context"
	"errors"
	"fmt"
	"iter"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// StreamEvents follows a session's journal as it grows and yields every
// event with seq > after, in seq order, each once: the in-process
// counterpart of client.StreamEvents, with the same signature. Pass the seq
// of the last event handled as after to resume exactly after it (0: from
// the start), across restarts of this process too: the journal is durable
// and gap-free.
//
// It never ends on its own while the session exists: the session's turns
// end, follow-up turns come. The error is non-nil only once, as the last
// value: ctx's error when ctx ends, the failure to read the journal (the
// session does not exist: client.IsNotFound), or, when the Runtime is
// closed under it, an error saying so. Breaking out of the loop stops it.
func (rt *Runtime) StreamEvents(ctx context.Context, sessionID string, after int64) iter.Seq2[lt.Event, error] {
	return rt.streamEvents(ctx, sessionID, after, "stream events", "stream events of")
}

// Subscribe is StreamEvents, by the name this package gave it first (its
// errors say "subscribe", as they always did).
func (rt *Runtime) Subscribe(ctx context.Context, sessionID string, after int64) iter.Seq2[lt.Event, error] {
	return rt.streamEvents(ctx, sessionID, after, "subscribe", "subscribe to")
}

// streamEvents is StreamEvents, its errors starting with verb (no session
// named) or verbOf and the session's id.
func (rt *Runtime) streamEvents(ctx context.Context, sessionID string, after int64, verb, verbOf string) iter.Seq2[lt.Event, error] {
	return func(yield func(lt.Event, error) bool) {
		if err := requireID("sessionID", sessionID); err != nil {
			yield(lt.Event{}, fmt.Errorf("%s: %w", verb, err))
			return
		}
		if after < 0 {
			yield(lt.Event{}, fmt.Errorf("%s %s: after %d is negative", verbOf, sessionID, after))
			return
		}
		follow(ctx, rt.svc.StreamEvents(asLibrary(ctx), sessionID, after), yield, func(err error) error {
			return fmt.Errorf("%s %s: %w", verbOf, sessionID, err)
		})
	}
}

// errClosing ends a stream of a Runtime that is closing: the service's
// stream stopped without an error while the caller's ctx is live, which
// only the engine stopping does.
var errClosing = errors.New("the runtime is closing")

// follow yields the values of the service's stream seq and ends it as the
// client's streams end: the service's stream stops without an error when
// ctx ends or the engine stops, a client's yields an error last, so a
// loop over either learns why it stopped: ctx's error, or errClosing. A
// failure is yielded as a *client.APIError when the caller caused it,
// wrapped by wrap; a read that failed because ctx ended is ctx's error.
func follow[T any](ctx context.Context, seq iter.Seq2[T, error], yield func(T, error) bool, wrap func(error) error) {
	var zero T
	for v, err := range seq {
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			yield(zero, wrap(apiError(err)))
			return
		}
		if !yield(v, nil) {
			return
		}
	}
	err := ctx.Err()
	if err == nil {
		err = errClosing
	}
	yield(zero, wrap(err))
}
