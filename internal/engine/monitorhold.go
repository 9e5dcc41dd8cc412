package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A monitor's pause holds the sub-agents too. A monitor action (a model
// monitor's pause verdict, a detector's ask) stops the session it was
// raised in until a person decides it; the sub-agents that session
// spawned share its workspace and budget and may be driven by the same
// injected instructions, so they must not go on meanwhile. They are
// paused as a person's pause of that session would pause them (pause.go),
// with that session as their pause's parent, and the reason names the
// action. They go on when it is decided: continue resumes them, stop ends
// the turn that spawned them, whose runner then asks them to stop
// (cancelOrphans) while they are still paused.
//
// The hold is a state of the session's journal (held: a pending monitor
// action; monitor.held only records that it was carried down): the walks
// of pause.go read it as they read a pause, so a person's pause and resume, a decision and the
// monitor's walk may meet in any order and the tree ends as the last
// write of the session says (settleTree). None of the sub-agents can be
// resumed alone, nor given a turn, while it holds them (ancestorPaused).
//
// Crash safety: the runner walks the tree after the action is durable and
// before it parks on it, and journals monitor.held once the walk is made.
// Until then the session stays runnable (journal.State.HoldDue), so a
// worker that stops in between (a crash, a drain, the database out of
// reach) leaves the walk to the next claim, on any node; another error of
// the walk fails the turn as an internal error, as any error of a step.
// The decision walks after its own write; a decision cut short is made
// whole by repeating it (a repeated decision answers the first one's
// result and walks again), and by the session's next claim, which lets go a sub-agent left paused under
// a session that holds nothing (releaseStaleHold): a walk that read the
// hold just before a decision, and whose worker stopped before it settled
// the tree, leaves one so.

// monitorHold is the pending monitor action of st that holds its
// sub-agents, or nil.
func monitorHold(st *journal.State) *lt.Action {
	return pendingOfType(st.Pending, lt.ActionMonitor)
}

// held reports whether the session of st holds its sub-agents: it is
// paused or asked to pause, or a monitor's pause waits for a person.
func held(st *journal.State) bool {
	return st.Pause != nil || monitorHold(st) != nil
}

// holdReason is the reason the sub-agents a session holds are paused
// with: its pause's, or the monitor action's.
func holdReason(st *journal.State) string {
	if st.Pause != nil {
		return st.Pause.Reason
	}
	if a := monitorHold(st); a != nil {
		return clip(fmt.Sprintf("held with %s, which a monitor paused (action %s): %s", st.Session.ID, a.ID, a.Summary), maxPauseReasonBytes)
	}
	return ""
}

// holdContext is ctx carrying the actor of st's hold, for the pauses of
// the sub-agents it holds: its pause's actor, or none for a monitor's (the
// engine holds them).
func holdContext(ctx context.Context, st *journal.State) context.Context {
	if st.Pause != nil && st.Pause.Actor != nil {
		return WithActor(ctx, *st.Pause.Actor)
	}
	return context.WithValue(ctx, actorKey{}, nil)
}

// holdSubagents makes action a durable and pauses the session's running
// sub-agents, and theirs, with its hold, before the runner parks on it;
// monitor.held then says the walk was made. Until it is durable the
// session stays runnable (State.HoldDue), so a worker that stops before
// it (a crash, a drain) leaves the walk to the next claim.
func (r *runner) holdSubagents(ctx context.Context, a *lt.Action) error {
	if !hasLiveChildren(r.st) {
		// Nothing to hold (the first tick recorded any sub-agent made
		// before its spawn was: spawnsMadeBefore): journaled with the
		// action, in the append that parks on it.
		return r.add(lt.EventMonitorHeld, a.TurnID, a.Step, lt.MonitorHeldData{ActionID: a.ID})
	}
	// The walk reads the hold from the store (holds): written first, with
	// the status a pending action gives the session (a reader who sees
	// the action sees requires_action; the row stays runnable until
	// monitor.held, State.HoldDue).
	if err := r.status(lt.SessionRequiresAction, ""); err != nil {
		return err
	}
	if err := r.flush(ctx, false); err != nil {
		return err
	}
	id := r.st.Session.ID
	if err := r.e.pauseSubagents(ctx, id, holdReason(r.st)); err != nil && !errors.Is(err, errWalkOver) {
		return fmt.Errorf("hold the sub-agents of %s: %w", id, err)
	}
	if err := r.e.settleTree(ctx, id, true); err != nil {
		return err
	}
	return r.add(lt.EventMonitorHeld, a.TurnID, a.Step, lt.MonitorHeldData{ActionID: a.ID})
}

// hasLiveChildren reports whether st has a sub-agent not done, one being
// cancelled included (a walk goes through it to what it spawned).
func hasLiveChildren(st *journal.State) bool {
	return slices.ContainsFunc(st.Children, func(c journal.Child) bool { return !c.Done })
}

// releaseStaleHold, at a claim, lets go the sub-agents a monitor's hold
// that is over left paused: a walk that paused one just before the
// decision was answered, and whose worker stopped before it settled the
// tree, leaves it paused under a session that holds nothing, which would
// wait for it for ever. Only a session a monitor held, and under no
// ancestor that holds it (a sub-agent being cancelled is gone through by
// its root's pause, and what it spawned is paused with it), looks.
func (r *runner) releaseStaleHold(ctx context.Context) error {
	st := r.st
	if held(st) || st.RunningChildren() == 0 || st.Tally.AsksOf(lt.ActionMonitor) == 0 {
		return nil
	}
	if p := st.Session.ParentID; p != nil {
		if err := r.e.ancestorPaused(ctx, st.Session.ID, *p); err != nil {
			if ae := (*apierror.Error)(nil); errors.As(err, &ae) && ae.Status == http.StatusConflict {
				return nil // the tree goes on from that ancestor
			}
			return err
		}
	}
	return r.e.releaseHold(ctx, st.Session.ID)
}

// releaseHold lets the sub-agents of session id that a monitor's pause
// held go on, once a decision left it holding nothing (the walk leaves
// them paused while it still holds them, or when the decision ended the
// turn that spawned them).
func (e *Engine) releaseHold(ctx context.Context, id string) error {
	if _, err := e.resumeSubagents(ctx, id); err != nil && !errors.Is(err, errWalkOver) {
		return fmt.Errorf("let the sub-agents of %s go on: %w", id, err)
	}
	return e.settleTree(ctx, id, false)
}
