package journal

import (
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Steer counts a session's steering messages, numbered 1, 2, … in journal
// order, against the model calls that carry them.
type Steer struct {
	// Count is how many turn.steered the journal holds.
	Count int `json:"count,omitempty"`
	// Sent is how many of them the latest step call carried
	// (lt.ModelRequestedData.Steers): Count > Sent means a message still has to
	// reach the model, and the turn may not end before it has.
	Sent int `json:"sent,omitempty"`
	// Interrupt is the number of the latest message sent with interrupt: a
	// step call carrying fewer is abandoned.
	Interrupt int `json:"interrupt,omitempty"`
}

// Undelivered reports whether a steering message has not reached a model
// call yet.
func (s Steer) Undelivered() bool { return s.Count > s.Sent }

func applySteered(s *State, ev *event) error {
	d, err := decode[lt.TurnSteeredData](ev)
	if err != nil {
		return err
	}
	if d.TurnID == "" {
		d.TurnID = ev.TurnID // the event's own, should its data be a blob's stub
	}
	t := s.CurrentTurn()
	if t == nil || t.ID != d.TurnID {
		return fmt.Errorf("turn.steered for %q, which is not the current turn", d.TurnID)
	}
	s.Steer.Count++
	if d.Interrupt {
		s.Steer.Interrupt = s.Steer.Count
	}
	return nil
}

func applySteersSent(s *State, d lt.ModelRequestedData) {
	if d.Purpose == "" && d.Steers > s.Steer.Sent {
		s.Steer.Sent = min(d.Steers, s.Steer.Count)
	}
}
