package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A request the server ran under an Idempotency-Key may run twice: its
// node died after the work committed and before the response was recorded,
// and the client's retry runs it again (store.IdempotencyClaim). What the
// request creates is named after the seed its claim keeps, so that the
// second run finds what the first made rather than making it again: a
// session created or forked is "ses_"+seed, a turn "turn_"+seed, and a
// webhook endpoint (internal/app) "whe_"+seed.

//
// The controls that create nothing with an id of their own (a steer, a
// constraint, a review) journal the seed in their event (its "request"),
// and a signal is "sig_"+seed: a seeded run looks for that event in the
// journal since the seed was made (requestDone), in the change that would
// journal it, and answers from it instead of journaling it again.

type seedKey struct{}

type seeded struct {
	seed  string
	rerun bool
}

// WithCreationSeed returns ctx carrying seed, which names what a creation
// made with it creates (a session, a fork, a turn): made once, whatever
// the number of runs. seed is 26 lowercase letters and digits, a lowercase
// ULID made when the request first ran (requestDone reads its time).
// rerun says that an earlier run of the request may have made it: a
// first run does not look.
func WithCreationSeed(ctx context.Context, seed string, rerun bool) context.Context {
	return context.WithValue(ctx, seedKey{}, seeded{seed: seed, rerun: rerun})
}

// CreationSeed returns the seed ctx carries (WithCreationSeed), for a
// creation outside the engine (a webhook endpoint) to be named after it;
// ok is false without one. A seed of another shape is an error.
func CreationSeed(ctx context.Context) (seed string, ok bool, err error) {
	v, ok := ctx.Value(seedKey{}).(seeded)
	if ok && !validSeed(v.seed) {
		return "", false, fmt.Errorf("creation seed %q is not 26 lowercase letters and digits", v.seed)
	}
	return v.seed, ok, nil
}

// IsRerun reports whether ctx's request may have run before with its seed
// (WithCreationSeed): what it makes is looked for first.
func IsRerun(ctx context.Context) bool {
	v, ok := ctx.Value(seedKey{}).(seeded)
	return ok && v.rerun
}

// requestSeed is the seed to journal in a control's event ("" without one).
func requestSeed(ctx context.Context) (string, error) {
	seed, _, err := CreationSeed(ctx)
	return seed, err
}

// requestPage is how many events requestDone reads at a time.
const requestPage = 256

// requestClockSlack is how far before its seed's time requestDone looks:
// the seed was made by one node's clock, the event may have been stamped
// by another's.
const requestClockSlack = time.Minute

// requestDone returns the event of type typ that a run of ctx's request
// journaled in session id's journal up to seq end (match tells it by its
// data), or nil; nil at once without a seed. It reads the journal back
// from end to the seed's time. Called inside a change conditional on the
// journal ending at end (mutateRow's row.LastSeq), it cannot miss a run of
// the same request that journals at the same time: that write moves the
// end, and the change is made again, looking again.
func (e *Engine) requestDone(ctx context.Context, id string, end int64, typ string, match func(data []byte) bool) (*lt.Event, error) {
	seed, ok, err := CreationSeed(ctx)
	if err != nil || !ok {
		return nil, err
	}
	since, err := seedSince(seed)
	if err != nil {
		return nil, err
	}
	for ; end > 0; end -= requestPage {
		evs, err := e.store.EventList(ctx, id, max(0, end-requestPage), int(min(requestPage, end)))
		if err != nil {
			return nil, err
		}
		for i := len(evs) - 1; i >= 0; i-- {
			ev := wireEvent(evs[i])
			if ev.Time.Before(since) {
				return nil, nil
			}
			if ev.Type != typ {
				continue
			}
			if ev, err = e.fullEvent(ctx, ev); err != nil {
				return nil, err
			}
			if match(ev.Data) {
				return &ev, nil
			}
		}
	}
	return nil, nil
}

// seedSince is the time a run of seed's request may have made something
// from: when the seed was made (its ULID's time), less requestClockSlack.
func seedSince(seed string) (time.Time, error) {
	u, err := ulid.ParseStrict(strings.ToUpper(seed))
	if err != nil {
		return time.Time{}, fmt.Errorf("creation seed %q: %w", seed, err)
	}
	return ulid.Time(u.Time()).Add(-requestClockSlack), nil
}

// madeBy tells the event data a run of seed journaled ("request").
func madeBy(seed string) func([]byte) bool {
	return func(data []byte) bool {
		var d struct {
			Request string `json:"request"`
		}
		return json.Unmarshal(data, &d) == nil && d.Request == seed
	}
}

// creationID is the id of what a creation made with ctx creates: prefix and
// ctx's seed (seeded), or a new one. A seeded creation that may follow an
// earlier run of its request (IsRerun) looks for what that run made first;
// any seeded creation that meets its id made meanwhile answers with it.
func creationID(ctx context.Context, prefix string, now time.Time) (id string, seeded bool, err error) {
	// A seed of another shape is the caller's wiring, never a client's:
	// the server makes seeds.
	seed, ok, err := CreationSeed(ctx)
	if err != nil || !ok {
		return newID(prefix, now), false, err
	}
	return prefix + seed, true, nil
}

func validSeed(s string) bool {
	if len(s) != 26 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// journaledBefore reports whether a run of ctx's request (its seed, if it
// has one) journaled an event of type typ in b's session up to the journal
// b's change is conditional on (row): the control then journals nothing
// and answers from the session as it is.
func (e *Engine) journaledBefore(ctx context.Context, row *store.SessionRow, typ string) (bool, error) {
	seed, ok, err := CreationSeed(ctx)
	if err != nil || !ok {
		return false, err
	}
	ev, err := e.requestDone(ctx, row.ID, row.LastSeq, typ, madeBy(seed))
	return ev != nil, err
}
