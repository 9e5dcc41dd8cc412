package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Pause and resume. A pause is not a cancel: it cuts nothing in flight.
// It takes effect at the session's next safe point, before its next model
// or tool call starts, and the session is then a row that no worker holds
// (status paused) until a person resumes it:
//
//   - a session no worker runs (queued, parked on a required action or a
//     wait) is paused at once, by the API (session.paused);
//   - a running one gets session.pause_requested; its worker reads the
//     session's last seq at every safe point, and the new events when
//     another writer appended (readControls, whichever node took the
//     request), journals session.paused and gives the session back
//     (tick). A worker whose unsaved events meet a session the API
//     paused meanwhile drops them and starts over from the journal
//     (runner.merge), so nothing it built before the pause runs.
//
// While paused, decisions and signals are recorded but run nothing, timers
// and expiries do not fire (journal.State.WakeAt), and a cancel still ends
// the turns. Paused time counts toward neither max_wall_seconds nor
// turn_timeout_seconds (journal/pause.go).

// A pause reaches a whole tree of sub-agents: they share the paused
// session's workspace and budget, and a person who pauses an agent means
// all of it. Each running sub-agent (and each of theirs) is paused as its
// parent is, at its own next safe point, and its pause names that parent
// (Pause.Parent). The parent's resume resumes the sub-agents its pause
// paused, and only those: one a person paused by itself stays paused, and
// none can be resumed alone, nor given a turn, while an ancestor is paused
// (the tree goes on as a whole, from its highest paused session). A
// sub-agent being cancelled is left as it is and gone through: what it
// spawned is paused with it. The sessions are separate
// journals, so the request walks the tree after pausing (or resuming) the
// session itself, and answers once the whole tree is done: a request cut
// short (a crash, a lost connection) is made whole by repeating it, which
// walks the tree again (a pause is idempotent, and a resume of a session
// that is no longer paused still resumes the sub-agents paused with it,
// unless a monitor's hold keeps them: monitorhold.go).
// A parent asked to pause creates no sub-agent after the request
// (SessionCreateParams.ParentAt), so the walk, which lists the children
// from the store after it, finds every one.

// maxPauseReasonBytes bounds a pause's reason: it is journaled and shown.
const maxPauseReasonBytes = 4 << 10

// PauseSession pauses a session and its running sub-agents at their next
// safe point (idempotent: a session already paused, or asked to, is
// returned as it is, and its sub-agents are paused if they were not). A
// session whose turns are over (idle, failed, cancelled) or that is being
// cancelled cannot be paused (409).
func (e *Engine) PauseSession(ctx context.Context, id string, req *lt.PauseRequest) (*lt.Session, error) {
	if len(req.Reason) > maxPauseReasonBytes {
		return nil, apierror.Invalid("reason", "must be at most %d bytes", maxPauseReasonBytes)
	}
	run, err := e.newSeededRun(ctx, id, lt.EventSessionPauseRequested, lt.EventSessionPaused)
	if err != nil {
		return nil, err
	}
	v, err := e.pauseOne(ctx, id, req.Reason, "", "", run)
	if err != nil {
		return nil, err
	}
	if err := e.pauseSubagents(ctx, id, req.Reason); err != nil && !errors.Is(err, errWalkOver) {
		return nil, err
	}
	if err := e.settleTree(ctx, id, true); err != nil {
		return nil, err
	}
	return v, nil
}

// settleTree makes the sub-agents of session id follow its pause as it
// stands once a walk that carried paused (true: a pause, false: a resume)
// is over. A pause and a resume of the same session may walk its tree at
// once, each after its own write to the session: a walk that ends reads
// the session again and, when the other request's write came last, walks
// the tree as that request would (the last write wins, as for one
// session). Each step of a walk also reads the parent it follows
// (pauseOne, resumeOne), so what is left to settle here is the instant
// between that read and the step's write.
func (e *Engine) settleTree(ctx context.Context, id string, paused bool) error {
	for range 3 {
		_, st, err := e.loadState(ctx, id)
		if err != nil {
			return notFound(err, "session", id)
		}
		if held(st) == paused {
			return nil
		}
		paused = held(st)
		if paused {
			// The sub-agents follow the pause of another request:
			// journaled with its actor, not this request's.
			err = e.pauseSubagents(holdContext(ctx, st), id, holdReason(st))
		} else {
			_, err = e.resumeSubagents(ctx, id)
		}
		if err != nil && !errors.Is(err, errWalkOver) {
			return err
		}
	}
	return nil
}

// pauseOne pauses one session, with its parent's pause when parent is set
// (a sub-agent whose turns are over or that is being cancelled is then
// left as it is: there is nothing of it to pause), as long as follow (the
// session whose pause a walk carries down) is paused: else nil, nil. run
// is a person's request (nil for a walk's step): one an earlier run of
// which paused the session answers with it as it is, though a person
// resumed it since.
func (e *Engine) pauseOne(ctx context.Context, id, reason, parent, follow string, run *seededRun) (*lt.Session, error) {
	return e.changeOnce(ctx, id, run, func(b *batch, request string) (bool, error) {
		st := b.st
		if follow != "" {
			// The pause carried down may have been resumed since the
			// walk read it: then this sub-agent has nothing to follow.
			if paused, err := e.holds(ctx, follow); err != nil || !paused {
				return false, err
			}
		}
		switch {
		case st.Pause != nil && parent == "" && st.Pause.Parent != "":
			// A person pauses a sub-agent paused with its parent: the
			// pause is theirs from now on, and the parent's resume
			// leaves it (journal.applyPause).
			return true, b.add(lt.EventSessionPauseRequested, "", 0, lt.SessionPauseRequestedData{Reason: reason, Actor: b.actor(), Request: request})
		case st.Pause != nil:
			// Already paused, or asked to: a repeated pause changes nothing.
			return true, nil
		case parent != "" && (len(st.Turns) == 0 || st.Session.Status.Terminal() || st.Cancel != nil):
			// A sub-agent that is done or stopping.
			return true, nil
		case len(st.Turns) == 0 || st.Session.Status.Terminal():
			return false, apierror.Conflict("session %s is %s: it has no turn to pause", id, st.Session.Status)
		case st.Cancel != nil:
			return false, apierror.Conflict("session %s is being cancelled", id)
		case parked(st.Session.Status):
			// No worker runs it (one that claimed it meanwhile drops
			// what it had not saved: runner.merge): paused now.
			return true, pauseNow(b, reason, parent, request)
		default:
			return true, b.add(lt.EventSessionPauseRequested, "", 0, lt.SessionPauseRequestedData{Reason: reason, Actor: b.actor(), Parent: parent, Request: request})
		}
	})
}

// pauseSubagents pauses the running sub-agents of session id, and theirs,
// with its pause.
func (e *Engine) pauseSubagents(ctx context.Context, id, reason string) error {
	return e.pauseBelow(ctx, id, id, reason)
}

// pauseBelow pauses the sub-agents of session id with its pause for as
// long as follow, the session whose pause the walk carries down (id, or
// the nearest ancestor of id that is paused), is paused. A sub-agent left
// as it is (being cancelled: a cancel an in-doubt call holds may last
// until a person decides) is gone through with follow unchanged, so what
// it spawned pauses too.
func (e *Engine) pauseBelow(ctx context.Context, id, follow, reason string) error {
	return e.eachLiveSubagent(ctx, id, func(child string) error {
		v, err := e.pauseOne(ctx, child, reason, id, follow, nil)
		if err != nil {
			return fmt.Errorf("pause sub-agent %s of %s: %w", child, id, err)
		}
		if v == nil {
			return errWalkOver // the pause carried down was resumed meanwhile
		}
		next := follow
		if v.Status == lt.SessionPaused || v.PauseRequested {
			next = child
		}
		return e.pauseBelow(ctx, child, next, reason)
	})
}

// ResumeSession ends a session's pause: it goes on where it stopped (a
// pause that had not taken effect yet is withdrawn), and so do the
// sub-agents its pause paused. A session that is neither paused nor asked
// to pause is a 409, unless sub-agents paused with it are still paused (a
// resume cut short is repeated): they are resumed. A sub-agent is a 409
// while an ancestor is paused (ancestorPaused).
func (e *Engine) ResumeSession(ctx context.Context, id string, _ *lt.ResumeRequest) (*lt.Session, error) {
	run, err := e.newSeededRun(ctx, id, lt.EventSessionResumed)
	if err != nil {
		return nil, err
	}
	// A run that may follow an earlier one of the same request (its server
	// died before its answer was recorded) looks for what that run did:
	// its session.resumed here (changeOnce), or, when the session was not
	// paused and it resumed only sub-agents paused with it (a resume cut
	// short, repeated), theirs. Then the session itself is not resumed
	// again: a person may have paused it since.
	walked := false
	if IsRerun(ctx) {
		if walked, err = e.resumedBelow(ctx, id, run.request()); err != nil {
			return nil, err
		}
	}
	var v *lt.Session
	var notPausedErr error // the 409 of a session found not paused
	if !walked {
		v, err = e.resumeOne(ctx, id, "", run)
		if errors.Is(err, errNotPaused) {
			notPausedErr, err = err, nil
		}
		if err != nil {
			return nil, err
		}
	}
	notPaused := walked || notPausedErr != nil
	if notPaused {
		// Not paused itself, it may still have sub-agents paused with
		// it (a resume cut short; or, being cancelled, it was gone
		// through by its ancestor's pause): they go on only if no
		// ancestor of it is paused.
		_, st, err := e.loadState(ctx, id)
		if err != nil {
			return nil, notFound(err, "session", id)
		}
		if p := st.Session.ParentID; p != nil {
			if err := e.ancestorPaused(ctx, id, *p); err != nil {
				if walked {
					v := st.View() // as the earlier run answered
					return &v, nil
				}
				return nil, err
			}
		}
	}
	n, err2 := e.resumeSubagents(ctx, id)
	if err2 == nil || errors.Is(err2, errWalkOver) {
		err2 = e.settleTree(ctx, id, false)
	}
	if err2 != nil {
		return nil, err2
	}
	if notPaused {
		if n == 0 && notPausedErr != nil {
			return nil, notPausedErr
		}
		return e.GetSession(ctx, id)
	}
	return v, nil
}

// resumedBelow reports whether a walk of the request whose seed is seed
// resumed a sub-agent in session id's tree (its session.resumed carries
// the seed: walkRun), ended since or not.
func (e *Engine) resumedBelow(ctx context.Context, id, seed string) (bool, error) {
	if seed == "" {
		return false, nil
	}
	found := false
	err := e.eachSubagent(ctx, id, true, func(child string) error {
		look, err := e.newRequestLook(ctx, child, madeBy(seed), lt.EventSessionResumed)
		if err != nil {
			return err
		}
		if found = look.found != nil; !found {
			if found, err = e.resumedBelow(ctx, child, seed); err != nil {
				return err
			}
		}
		if found {
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}

// errFound ends a walk of a tree that found what it looked for.
var errFound = errors.New("found")

// errNotPaused: the session is neither paused nor asked to pause.
var errNotPaused = errors.New("not paused")

// resumeOne resumes one session: with its parent's resume when parent is
// set, in which case a session whose pause is not that parent's is left
// as it is (nil, nil). run is a person's request (nil for a walk's step):
// one an earlier run of which resumed the session answers with it as it
// is, paused again since or not.
func (e *Engine) resumeOne(ctx context.Context, id, parent string, run *seededRun) (*lt.Session, error) {
	return e.changeOnce(ctx, id, run, func(b *batch, request string) (bool, error) {
		st := b.st
		if st.Pause == nil {
			return false, notPausedError{apierror.Conflict("session %s is not paused (status %s)", id, st.Session.Status)}
		}
		switch {
		case parent != "" && st.Pause.Parent != parent:
			return false, nil // paused by a person, or by another cause
		case parent != "":
			// The parent may have been paused again since the walk
			// read it: then this sub-agent stays paused with it. One
			// whose spawning turn is over stays paused too: its parent
			// asks it to stop (runner.cancelOrphans), and resumed it
			// could start a step before that.
			if paused, err := e.holdsChild(ctx, parent, id); err != nil || paused {
				return false, err
			}
		case st.Session.ParentID != nil:
			if err := e.ancestorPaused(ctx, id, *st.Session.ParentID); err != nil {
				return false, err
			}
		}
		var pausedMS int64
		if at := st.Pause.At; at != nil {
			pausedMS = max(e.clock.Now().Sub(*at), 0).Milliseconds()
		}
		wasPaused := st.Paused()
		if err := b.add(lt.EventSessionResumed, "", 0, lt.SessionResumedData{PausedMS: pausedMS, Actor: b.actor(), Parent: parent, Request: request}); err != nil {
			return false, err
		}
		if !wasPaused {
			return true, nil
		}
		return true, b.status(resumedStatus(b.st), "")
	})
}

// notPausedError is resumeOne's 409 for a session that is not paused; it
// is errNotPaused, so ResumeSession can tell it from other conflicts.
type notPausedError struct{ conflict *apierror.Error }

func (e notPausedError) Error() string { return e.conflict.Error() }

func (e notPausedError) Is(target error) bool { return target == errNotPaused }

func (e notPausedError) Unwrap() error { return e.conflict }

// holds reports whether session id holds its sub-agents: it is paused or
// asked to pause, or a monitor's pause waits for a person (held).
func (e *Engine) holds(ctx context.Context, id string) (bool, error) {
	_, st, err := e.loadState(ctx, id)
	if err != nil {
		return false, notFound(err, "session", id)
	}
	return held(st), nil
}

// holdsChild reports whether session id keeps its sub-agent child paused:
// it holds its sub-agents, or the turn that spawned child is over (the
// child is to be asked to stop, or was).
func (e *Engine) holdsChild(ctx context.Context, id, child string) (bool, error) {
	_, st, err := e.loadState(ctx, id)
	if err != nil {
		return false, notFound(err, "session", id)
	}
	return held(st) || spawnedByEndedTurn(st, child), nil
}

// spawnedByEndedTurn reports whether child is a sub-agent of st, not done,
// whose spawning turn is over.
func spawnedByEndedTurn(st *journal.State, child string) bool {
	for _, c := range st.Children {
		if c.ID != child {
			continue
		}
		if c.Done {
			return false
		}
		return !slices.ContainsFunc(st.Turns, func(t lt.Turn) bool { return t.ID == c.TurnID })
	}
	return false
}

// ancestorPaused is the 409 for resuming alone a sub-agent whose parent,
// or an ancestor of it, is paused (or asked to be) or held by a monitor's
// pause: the tree goes on as a whole, from the highest one that holds it,
// which it names.
func (e *Engine) ancestorPaused(ctx context.Context, id, parent string) error {
	top, topAction := "", ""
	for at, depth := parent, 0; at != "" && depth < 64; depth++ {
		_, st, err := e.loadState(ctx, at)
		switch {
		case errors.Is(err, store.ErrNotFound):
			at = ""
			continue
		case err != nil:
			return err
		}
		switch a := monitorHold(st); {
		case st.Pause != nil:
			top, topAction = at, ""
		case a != nil:
			top, topAction = at, a.ID
		}
		at = ""
		if p := st.Session.ParentID; p != nil {
			at = *p
		}
	}
	switch {
	case top == "":
		return nil
	case topAction != "":
		return apierror.Conflict("session %s is a sub-agent under %s, which a monitor paused: decide its action %s first (continue or stop)", id, top, topAction)
	}
	return apierror.Conflict("session %s is a sub-agent under %s, which is paused (or pausing): resume %s first", id, top, top)
}

// errWalkOver stops a walk of a tree whose session no longer has the pause
// the walk carries down; settleTree takes it from there.
var errWalkOver = errors.New("the walk's pause is over")

// resumeSubagents resumes the sub-agents of session id paused with its
// pause, and theirs, and counts them. It goes down through a sub-agent
// that is not paused, too: a resume cut short may have resumed it and not
// its own.
func (e *Engine) resumeSubagents(ctx context.Context, id string) (int, error) {
	n := 0
	err := e.eachLiveSubagent(ctx, id, func(child string) error {
		v, err := e.resumeOne(ctx, child, id, walkRun(ctx))
		switch {
		case errors.Is(err, errNotPaused):
			if paused, err := e.holds(ctx, id); err != nil || paused {
				return cmp.Or(err, errWalkOver) // paused again meanwhile
			}
		case err != nil:
			return fmt.Errorf("resume sub-agent %s of %s: %w", child, id, err)
		case v == nil:
			return nil // paused by itself: its sub-agents stay with it
		default:
			n++
		}
		m, err := e.resumeSubagents(ctx, child)
		n += m
		return err
	})
	return n, err
}

// eachLiveSubagent calls fn with the id of each sub-agent of session id
// whose turns are not over, as the store lists them (a sub-agent created
// but not yet recorded in its parent's journal is among them).
func (e *Engine) eachLiveSubagent(ctx context.Context, id string, fn func(child string) error) error {
	return e.eachSubagent(ctx, id, false, fn)
}

// eachSubagent calls fn with the id of each sub-agent of session id as the
// store lists them: those whose turns are over too with ended, else not.
func (e *Engine) eachSubagent(ctx context.Context, id string, ended bool, fn func(child string) error) error {
	const page = 500
	cursor := ""
	for {
		rows, err := e.store.SessionList(ctx, &store.SessionListParams{ParentID: id, Cursor: cursor, Limit: page})
		if err != nil {
			return fmt.Errorf("list the sub-agents of %s: %w", id, err)
		}
		for _, row := range rows {
			if !ended && lt.SessionStatus(row.Status).Terminal() {
				continue
			}
			if err := fn(row.ID); err != nil {
				return err
			}
		}
		if len(rows) < page {
			return nil
		}
		cursor = rows[len(rows)-1].ID
	}
}

// parked reports whether a session in this status is held by no worker:
// its pause can take effect at once.
func parked(s lt.SessionStatus) bool {
	return s == lt.SessionQueued || s == lt.SessionRequiresAction || s == lt.SessionWaiting
}

// pauseNow journals the pause taking effect, asked for by the batch's
// actor (with the parent's pause when parent is set).
func pauseNow(b *batch, reason, parent, request string) error {
	if err := b.add(lt.EventSessionPaused, "", 0, lt.SessionPausedData{Reason: reason, Actor: b.actor(), Parent: parent, Request: request}); err != nil {
		return err
	}
	return b.status(lt.SessionPaused, "")
}

// resumedStatus is what a session is once resumed: what it would be had
// it never been paused. A wait whose time came meanwhile is still waiting
// here: its row's wake time has passed, so a worker claims it at once and
// the wait ends as it would have.
func resumedStatus(st *journal.State) lt.SessionStatus {
	switch t := st.CurrentTurn(); {
	case len(st.Pending) > 0:
		return lt.SessionRequiresAction
	case st.Wait != nil && st.Wait.Signal == nil && !st.Wait.Satisfied:
		return lt.SessionWaiting
	case t != nil && t.Status == lt.TurnQueued:
		return lt.SessionQueued
	default:
		return lt.SessionRunning
	}
}

// pause carries out a requested pause at the runner's safe point (or finds
// the session paused): the pause is journaled, and the session is given
// back. It reports whether the runner is done (see park).
func (r *runner) pause(ctx context.Context) (bool, error) {
	if !r.st.PauseRequested() {
		return r.park(ctx) // paused by the API already
	}
	events, blobs := len(r.b.events), len(r.b.blobs)
	if err := r.add(lt.EventSessionPaused, "", 0, lt.SessionPausedData{Reason: r.st.Pause.Reason, Actor: r.st.Pause.Actor, Parent: r.st.Pause.Parent}); err != nil {
		return false, err
	}
	if err := r.status(lt.SessionPaused, ""); err != nil {
		return false, err
	}
	// Only on the journal the runner read: a resume answered meanwhile
	// withdrew the request (merged, the pause would be made anew over
	// it, journal.Apply, and the session would stay paused after its
	// resume's 200), so the pause is dropped and the tick decides again.
	if durable, err := r.appendOrDrop(ctx, events, blobs, true, dropOnWrite); !durable || err != nil {
		return false, err
	}
	return r.released, nil
}

// readControls is the safe point's look for a pause or a cancel: when
// another writer asked for one (or paused the session) since the runner
// last read the journal, on this node or any other, the runner merges the
// journal before it starts anything else. It reads the store itself rather
// than waiting for a notice, so a control that was answered before the
// safe point is always seen there. A cancel also cuts a call in flight
// (interrupt.go), but a read-only call writes nothing before it starts, so
// this look is what keeps one from starting after a cancel was answered
// (API.md: before the next model call or tool call starts). Other writes
// (a steer, a decision) are merged when the runner next appends. Only the
// session's last seq is read: while the journal ends where this runner
// last wrote, which is nearly always, nothing else need be.
func (r *runner) readControls(ctx context.Context) error {
	r.tickSeq = -1
	seq, err := r.e.store.SessionLastSeq(ctx, r.lease.SessionID)
	if err != nil {
		return err
	}
	r.tickSeq = seq
	if seq <= r.durableSeq {
		return nil
	}
	foreign, err := r.e.store.EventList(ctx, r.lease.SessionID, r.durableSeq, int(seq-r.durableSeq))
	if err != nil {
		return err
	}
	if controlAmong(foreign) {
		return r.merge(ctx)
	}
	return nil
}

// controlAmong reports whether the events hold a control that must act
// before anything else starts: a pause asked for or taken, or a cancel.
func controlAmong(evs []store.Event) bool {
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventSessionPauseRequested, lt.EventSessionPaused, lt.EventSessionCancelRequested:
			return true
		}
	}
	return false
}

// pausedAmong reports whether the events hold a pause taking effect.
func pausedAmong(evs []store.Event) bool {
	for _, ev := range evs {
		if ev.Type == lt.EventSessionPaused {
			return true
		}
	}
	return false
}
