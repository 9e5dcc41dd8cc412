package journal

import (
	"fmt"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Pausing a session. A person's pause takes effect at the session's next
// safe point: at once for a session that holds no worker (queued, parked on
// a required action or a wait), else when the call in flight has finished
// (session.pause_requested, then session.paused). While paused the session
// runs nothing and is claimed by no worker: it is not Runnable and has no
// wake time, whatever a decision or a signal changes meanwhile (they are
// recorded). session.resumed ends the pause; the session then is what it
// would have been without it, and a timer that came due meanwhile fires.
//
// Paused time does not count toward the session's wall-clock budget nor
// the turn's timeout: it is measured from the events' own times (the
// session.paused and session.resumed of each pause), so it is part of the
// projection and a replay gives the same deadlines.

// Pause is a session's pause, from its request until it is resumed.
type Pause struct {
	Reason string `json:"reason,omitempty"`
	// Actor is who asked for the pause: session.paused, journaled later
	// by a worker at its safe point, records it as that pause's actor.
	Actor *lt.Actor `json:"actor,omitempty"`
	// Requested: the pause began with a request (session.pause_requested),
	// the decision a report counts, rather than taking effect at once.
	Requested bool `json:"requested,omitempty"`
	// At is when the pause took effect (session.paused); nil while it is
	// only requested.
	At *time.Time `json:"at,omitempty"`
	// Parent is set on a sub-agent whose pause is its parent's: the
	// parent's id (engine/pause.go says how a pause reaches a tree).
	Parent string `json:"parent,omitempty"`
}

// Paused reports whether a pause is in effect: nothing runs.
func (s *State) Paused() bool { return s.Pause != nil && s.Pause.At != nil }

// PauseRequested reports whether a pause waits for the next safe point.
func (s *State) PauseRequested() bool { return s.Pause != nil && s.Pause.At == nil }

// WallElapsed is how much of the session's wall-clock budget is spent at
// now: the time since its creation less the time it spent paused (the
// clock stands still during a pause).
func (s *State) WallElapsed(now time.Time) time.Duration {
	d := now.Sub(s.Session.CreatedAt) - s.PausedFor
	if s.Paused() {
		d -= now.Sub(*s.Pause.At)
	}
	return d
}

// applyPause folds session.pause_requested, session.paused and
// session.resumed into s.
func applyPause(s *State, ev *event) error {
	switch ev.Type {
	case lt.EventSessionPauseRequested:
		d, err := decode[lt.SessionPauseRequestedData](ev)
		if err != nil {
			return err
		}
		switch {
		case s.Pause == nil:
			s.Pause = &Pause{Reason: d.Reason, Actor: d.Actor, Requested: true, Parent: d.Parent}
		case d.Parent == "":
			// A person's own pause of a session paused with its
			// parent: the pause is theirs now (its reason and actor
			// too), and the parent's resume leaves it.
			s.Pause.Parent, s.Pause.Reason, s.Pause.Actor = "", d.Reason, d.Actor
		}
	case lt.EventSessionPaused:
		d, err := decode[lt.SessionPausedData](ev)
		if err != nil {
			return err
		}
		if len(s.Turns) == 0 {
			return fmt.Errorf("paused with no turn")
		}
		if s.Pause == nil {
			s.Pause = &Pause{}
		}
		if d.Reason != "" {
			s.Pause.Reason = d.Reason
		}
		if d.Actor != nil {
			s.Pause.Actor = d.Actor
		}
		if d.Parent != "" {
			s.Pause.Parent = d.Parent
		}
		at := ev.Time
		s.Pause.At = &at
	case lt.EventSessionResumed:
		if s.Pause == nil {
			return fmt.Errorf("resumed but not paused")
		}
		endPause(s, ev.Time)
	}
	return nil
}

// endPause ends the session's pause at t: the time it was in effect is
// added to the paused time, and the running turn's deadline and a
// wait_agents' timeout move by as much (they count working time).
func endPause(s *State, t time.Time) {
	if s.Pause == nil {
		return
	}
	if at := s.Pause.At; at != nil && t.After(*at) {
		d := t.Sub(*at)
		s.PausedFor += d
		if s.TurnDeadline != nil {
			moved := s.TurnDeadline.Add(d)
			s.TurnDeadline = &moved
		}
		// A wait_agents' timeout too: the sub-agents it waits for were
		// paused with the session (engine/pause.go), so the time paused
		// gave them none to finish in. A sleep's or a signal's timer
		// keeps its time: one that came due meanwhile fires on resume.
		if w := s.Wait; w != nil && w.Kind == lt.WaitAgents && w.Until != nil {
			moved := w.Until.Add(d)
			w.Until = &moved
		}
	}
	s.Pause = nil
}
