package trace

import (
	"strconv"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// PauseWaitKind is the wait_kind of the span a pause adds to its turn: a
// wait span from session.paused to session.resumed, so a turn that took a
// night shows where the night went.
const PauseWaitKind = "pause"

// pauseEvent opens the pause span of the current turn at session.paused,
// and closes it at session.resumed (a turn that ends while paused, by a
// cancel, closes it as cancelled).
func (b *builder) pauseEvent(ev lt.Event) error {
	switch ev.Type {
	case lt.EventSessionPaused:
		d, err := decode[lt.SessionPausedData](ev)
		if err != nil {
			return err
		}
		t := b.current()
		if t == nil {
			return nil
		}
		name := "paused"
		if d.Reason != "" {
			name += ": " + d.Reason
		}
		b.pause = t.n.add(&node{span: lt.Span{
			ID: t.n.span.ID + "/pause/" + strconv.FormatInt(ev.Seq, 10), Kind: lt.SpanWait, Name: name, Start: ev.Time, Status: lt.SpanRunning,
			Attributes: lt.SpanAttributes{TurnID: t.n.span.ID, WaitKind: PauseWaitKind},
		}})
	case lt.EventSessionResumed:
		if b.pause != nil {
			b.pause.close(ev.Time, lt.SpanOK, "")
			b.pause = nil
		}
	}
	return nil
}
