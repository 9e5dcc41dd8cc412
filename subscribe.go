package longhaul

import (
	"context"
	"fmt"
	"iter"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Subscription tuning: the page read at a time, and how often the journal
// is read again without a notification (notifications are hints that a
// busy process may miss).
const (
	subscribePage = 500
	subscribePoll = 2 * time.Second
)

// Subscribe follows a session's journal as it grows and yields every event
// with seq > after, in seq order, each once: the in-process counterpart of
// client.StreamEvents. Pass the seq of the last event handled as after to
// resume exactly after it (0: from the start), across restarts of this
// process too: the journal is durable and gap-free.
//
// It never ends on its own while the session exists: the session's turns
// end, follow-up turns come. The error is non-nil only once, as the last
// value: ctx's error when ctx ends, or the failure to read the journal
// (the session does not exist: client.IsNotFound). Breaking out of the
// loop stops it.
func (rt *Runtime) Subscribe(ctx context.Context, sessionID string, after int64) iter.Seq2[lt.Event, error] {
	return func(yield func(lt.Event, error) bool) {
		if err := requireID("sessionID", sessionID); err != nil {
			yield(lt.Event{}, fmt.Errorf("subscribe: %w", err))
			return
		}
		if after < 0 {
			yield(lt.Event{}, fmt.Errorf("subscribe to %s: after %d is negative", sessionID, after))
			return
		}
		// Watching before the first read: growth between the read and the
		// wait is not missed.
		grew, stop := rt.eng.WatchSession(ctx, sessionID)
		defer stop()
		poll := time.NewTimer(subscribePoll)
		defer poll.Stop()
		for {
			evs, err := rt.eng.ListEvents(ctx, sessionID, after, subscribePage)
			if err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(lt.Event{}, fmt.Errorf("subscribe to %s: %w", sessionID, apiError(err)))
				return
			}
			for _, ev := range evs {
				if ev.Seq <= after {
					continue // the journal's seqs only grow; never yield one twice
				}
				if !yield(ev, nil) {
					return
				}
				after = ev.Seq
			}
			if len(evs) == subscribePage {
				continue
			}
			poll.Reset(subscribePoll)
			select {
			case <-ctx.Done():
				yield(lt.Event{}, fmt.Errorf("subscribe to %s: %w", sessionID, ctx.Err()))
				return
			case <-grew:
			case <-poll.C:
			}
		}
	}
}
