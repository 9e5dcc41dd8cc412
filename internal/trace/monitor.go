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

// A monitor.reviewed closes the model monitor's call (a model span of
// purpose monitor, with its usage), when its model answered; its verdict
// and reasons are shown, as a finding's line, on the span of the call it
// reviewed before it ran, else on its step.
func (b *builder) monitorReviewed(ev lt.Event) error {
	d, err := decode[lt.MonitorReviewedData](ev)
	if err != nil {
		return err
	}
	if d.ModelCalled() {
		if err := b.modelAnswered(ev); err != nil {
			return err
		}
	}
	t := b.turn(ev)
	n := t.n
	if s := t.steps[d.Step]; s != nil {
		n = s.n
	}
	if d.CallID != "" {
		for key, c := range t.calls {
			if key[0] == d.Step && c.n.span.Attributes.CallID == d.CallID {
				n = c.n
			}
		}
	}
	n.span.Attributes.Findings = append(n.span.Attributes.Findings, reviewLine(&d))
	return nil
}

// reviewLine is a review as one line: "model monitor (before): pause: …".
func reviewLine(d *lt.MonitorReviewedData) string {
	line := "model monitor (" + d.Trigger + "): " + d.Verdict
	if d.Failed {
		line += " (failed closed)"
	}
	if len(d.Reasons) > 0 {
		line += ": " + strings.Join(d.Reasons, "; ")
	}
	return line
}
