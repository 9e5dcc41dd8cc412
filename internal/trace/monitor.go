package trace

import (
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A monitor.finding is shown on the span of the tool call its newest
// evidence belongs to (the call whose arguments, outcome or connection
// showed it), else on its step, else on its turn: Attributes.Findings,
// one line per finding.

// callRef is the part of a call's events that names the call.
type callRef struct {
	Step  int `json:"step"`
	Index int `json:"index"`
}

// noteCallEvent remembers which call span an event of a call belongs to,
// for the findings that name it as evidence.
func (b *builder) noteCallEvent(ev lt.Event) {
	switch ev.Type {
	case lt.EventToolRequested, lt.EventToolCompleted, lt.EventToolFailed, lt.EventNetworkConnection:
	default:
		return
	}
	ref, err := decode[callRef](ev)
	if err != nil {
		return
	}
	if c := b.call(ev, ref.Step, ref.Index); c != nil {
		if b.callBySeq == nil {
			b.callBySeq = map[int64]*node{}
		}
		b.callBySeq[ev.Seq] = c.n
	}
}

func (b *builder) monitorFinding(ev lt.Event) error {
	d, err := decode[lt.MonitorFindingData](ev)
	if err != nil {
		return err
	}
	var n *node
	if len(d.Evidence) > 0 {
		n = b.callBySeq[d.Evidence[len(d.Evidence)-1]]
	}
	if n == nil {
		t := b.turn(ev)
		n = t.n
		if s := t.steps[ev.Step]; s != nil {
			n = s.n
		}
	}
	line := d.Detector + " (" + d.Severity + ", " + d.Action + "): " + d.Summary
	n.span.Attributes.Findings = append(n.span.Attributes.Findings, strings.TrimSpace(line))
	return nil
}
