package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
// constraint, a review, a cancel, a pause, a resume) journal the seed in
// their event (its "request"), and a signal is "sig_"+seed: a seeded run
// looks for that event in the journal since the seed was made
// (requestLook), in the change that would journal it, and answers from it
// instead of journaling it again (a pause or a resume again after a
// person's resume or pause in between would undo theirs; a resume found
// no longer paused would answer 409 for the resume it made). An agent
// version records the seed with its creator (agents.go).

type seedKey struct{}

type seeded struct {
	seed  string
	rerun bool
}

// WithCreationSeed returns ctx carrying seed, which names what a creation
// made with it creates (a session, a fork, a turn): made once, whatever
// the number of runs. seed is 26 lowercase letters and digits, a lowercase
// ULID made when the request first ran (requestLook reads its time).
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

// seededRun is a control request's seed, journaled in its event, and the
// look for that event an earlier run of the request journaled. A nil
// seededRun has no seed and finds nothing; one without a look (a step of
// a resume's walk down the tree, walkRun) journals its seed and looks for
// nothing.
type seededRun struct {
	seed string
	look *requestLook
}

// walkRun is the seededRun of a step of ctx's request's walk down a tree:
// it journals the request's seed in the sub-agent's event, which a rerun
// of the request looks for there (resumedBelow), and looks for nothing.
func walkRun(ctx context.Context) *seededRun {
	seed, _ := requestSeed(ctx) // a seed of another shape looks for nothing
	return &seededRun{seed: seed}
}

// newSeededRun starts the look of ctx's request (match: made by its seed)
// in session id's journal for an event of one of types.
func (e *Engine) newSeededRun(ctx context.Context, id string, types ...string) (*seededRun, error) {
	seed, err := requestSeed(ctx)
	if err != nil {
		return nil, err
	}
	look, err := e.newRequestLook(ctx, id, madeBy(seed), types...)
	if err != nil {
		return nil, err
	}
	return &seededRun{seed: seed, look: look}, nil
}

// madeBefore returns the event an earlier run of the request journaled,
// looking up to seq end (requestLook.upTo); nil if none did.
func (r *seededRun) madeBefore(ctx context.Context, end int64) (*lt.Event, error) {
	if r == nil || r.look == nil {
		return nil, nil
	}
	return r.look.upTo(ctx, end)
}

// request is the seed to journal in the control's event.
func (r *seededRun) request() string {
	if r == nil {
		return ""
	}
	return r.seed
}

// journalControl journals what add adds to session id's journal for a
// control request (a steer, a constraint, a review, a cancel) with its
// seed (request, "" without one), and returns the session: as it is, with
// nothing added, when an earlier run of ctx's request journaled its event
// of type typ.
func (e *Engine) journalControl(ctx context.Context, id, typ string, add func(b *batch, request string) error) (*lt.Session, error) {
	run, err := e.newSeededRun(ctx, id, typ)
	if err != nil {
		return nil, err
	}
	return e.changeOnce(ctx, id, run, func(b *batch, request string) (bool, error) {
		return true, add(b, request)
	})
}

// changeOnce makes the change change adds to session id's journal for
// run (nil: none, as for a step of a walk down a tree), and returns the
// session as the change left it, or nil when change says there is nothing
// to answer with (false). When an earlier run of the request journaled
// its event, it changes nothing and returns the session as it is. The
// look is made in each attempt of the change, so two runs at once journal
// it once.
func (e *Engine) changeOnce(ctx context.Context, id string, run *seededRun, change func(b *batch, request string) (bool, error)) (*lt.Session, error) {
	v, err := mutateRow(ctx, e, id, func(row *store.SessionRow, b *batch) (*lt.Session, error) {
		if done, err := run.madeBefore(ctx, row.LastSeq); done != nil || err != nil {
			v := b.st.View()
			return &v, err
		}
		if answer, err := change(b, run.request()); !answer || err != nil {
			return nil, err
		}
		v := b.st.View()
		return &v, nil
	})
	if err != nil {
		return nil, notFound(err, "session", id)
	}
	return v, nil
}

// requestPage is how many events a requestLook reads at a time.
const requestPage = 256

// requestClockSlack is how far before its seed's time a requestLook looks:
// the seed was made by one node's clock, the event may have been stamped
// by another's.
const requestClockSlack = time.Minute

// requestLook looks for the event of one of its types (match tells it by its data)
// that a run of ctx's request journaled in a session's journal: once, back
// from the journal's end to the seed's time (newRequestLook), then, in
// each attempt of the change that would journal it, over the events
// appended since (upTo). The journal only grows, so no attempt reads what
// an earlier one read. Called with the end a change's append is
// conditional on, it cannot miss a run of the same request that journals
// at the same time: that write moves the end, and the change is made
// again, looking again.
type requestLook struct {
	e       *Engine
	id      string
	types   []string
	match   func(data []byte) bool
	since   time.Time // zero: no seed, nothing to look for
	checked int64     // the events up to this seq were looked at
	found   *lt.Event
}

// newRequestLook starts the look of ctx's request in session id's journal
// for the event of one of types that match tells (nothing to look for
// without a seed).
func (e *Engine) newRequestLook(ctx context.Context, id string, match func(data []byte) bool, types ...string) (*requestLook, error) {
	l := &requestLook{e: e, id: id, types: types, match: match}
	seed, ok, err := CreationSeed(ctx)
	if err != nil || !ok {
		return l, err
	}
	if l.since, err = seedSince(seed); err != nil {
		return nil, err
	}
	row, err := e.store.SessionGet(ctx, id)
	if err != nil {
		return nil, notFound(err, "session", id)
	}
	_, err = l.upTo(ctx, row.LastSeq)
	return l, err
}

// upTo returns the event looked for, looking at the journal up to seq end
// past what was looked at already; nil if no run journaled it.
func (l *requestLook) upTo(ctx context.Context, end int64) (*lt.Event, error) {
	if l.since.IsZero() || l.found != nil || end <= l.checked {
		return l.found, nil
	}
	for top := end; top > l.checked; top -= requestPage {
		from := max(l.checked, top-requestPage)
		evs, err := l.e.store.EventList(ctx, l.id, from, int(top-from))
		if err != nil {
			return nil, err
		}
		for i := len(evs) - 1; i >= 0; i-- {
			ev := wireEvent(evs[i])
			if ev.Time.Before(l.since) {
				l.checked = end
				return nil, nil
			}
			if !slices.Contains(l.types, ev.Type) {
				continue
			}
			if ev, err = l.e.fullEvent(ctx, ev); err != nil {
				return nil, err
			}
			if l.match(ev.Data) {
				l.found = &ev
				return l.found, nil
			}
		}
	}
	l.checked = end
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
