package journal

import (
	"fmt"
	"slices"
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The report's "tighten" flag: a policy rule whose allowed or approved
// call the trajectory monitor flagged (a monitor.finding's evidence names
// one of the call's events, or the model monitor answered warn or pause
// before it) is a candidate to tighten. The tally links the
// two as the journal grows, whichever comes first: a finding about a
// call's arguments is journaled before its policy is evaluated, one about
// its result or its connections after it ran.

// RuleCall is a call a policy rule allowed, or asked about: the rule, and
// the call's events a finding may name.
type RuleCall struct {
	Call string `json:"call"`
	Tool string `json:"tool"`
	// Rule is the rule that allowed the call, or asked about it and the
	// call ran (a person approved it); Asked the rule that asked, until
	// then.
	Rule  string `json:"rule,omitempty"`
	Asked string `json:"asked,omitempty"`
	// Seqs are its tool.requested and the events of its run, at most
	// maxRuleCallSeqs.
	Seqs []int64 `json:"seqs"`
}

// Bounds of what the tally keeps for the tighten flag: a session keeps the
// latest maxRuleCalls calls a rule matched, and the flags of calls whose
// rule is not known yet (maxFlaggedCalls); a finding naming an older call
// flags nothing.
const (
	maxRuleCalls    = 128
	maxRuleCallSeqs = 8
	maxFlaggedCalls = 32
)

// ruleCall returns the tracked call id, or nil.
func (t *Tally) ruleCall(id string) *RuleCall {
	for i := len(t.RuleCalls) - 1; i >= 0; i-- {
		if t.RuleCalls[i].Call == id {
			return &t.RuleCalls[i]
		}
	}
	return nil
}

// tighten flags rule, keeping the first reason.
func (t *Tally) tighten(rule, reason string) {
	if t.Tighten == nil {
		t.Tighten = map[string]string{}
	}
	if _, ok := t.Tighten[rule]; !ok {
		t.Tighten[rule] = reason
	}
}

// settle flags c's rule if a finding flagged c before its rule was known.
func (t *Tally) settle(c *RuleCall) {
	if reason, ok := t.Flagged[c.Call]; ok && c.Rule != "" {
		t.tighten(c.Rule, reason)
		delete(t.Flagged, c.Call)
		if len(t.Flagged) == 0 {
			t.Flagged = nil
		}
	}
}

// linkRules folds the events that link a policy rule and a monitor
// finding.
func (t *Tally) linkRules(s *State, ev *event) {
	switch ev.Type {
	case lt.EventPolicyDecided:
		d, err := decode[lt.PolicyDecidedData](ev)
		if err != nil || d.Rule == "" || (d.Decision != lt.PolicyAllow && d.Decision != lt.PolicyAsk) {
			return
		}
		c := RuleCall{Call: d.CallID, Tool: d.Tool}
		if call := s.Call(d.Step, d.Index); call != nil && call.ArgumentsSeq > 0 {
			c.Seqs = []int64{call.ArgumentsSeq}
		}
		if d.Decision == lt.PolicyAllow {
			c.Rule = d.Rule
		} else {
			c.Asked = d.Rule
		}
		t.RuleCalls = append(t.RuleCalls, c)
		if len(t.RuleCalls) > maxRuleCalls {
			t.RuleCalls = slices.Delete(t.RuleCalls, 0, len(t.RuleCalls)-maxRuleCalls)
		}
		t.settle(&t.RuleCalls[len(t.RuleCalls)-1])
	case lt.EventToolStarted:
		d, err := decode[lt.ToolStartedData](ev)
		if err != nil {
			return
		}
		if c := t.ruleCall(d.CallID); c != nil {
			if c.Asked != "" {
				c.Rule, c.Asked = c.Asked, ""
			}
			c.addSeq(ev.Seq)
			t.settle(c)
		}
	case lt.EventToolCompleted:
		if d, err := decode[lt.ToolCompletedData](ev); err == nil {
			if c := t.ruleCall(d.CallID); c != nil {
				c.addSeq(ev.Seq)
			}
		}
	case lt.EventToolFailed:
		if d, err := decode[lt.ToolFailedData](ev); err == nil {
			if c := t.ruleCall(d.CallID); c != nil {
				c.addSeq(ev.Seq)
			}
		}
	case lt.EventNetworkConnection:
		if d, err := decode[lt.NetworkConnectionData](ev); err == nil && d.CallID != "" {
			if c := t.ruleCall(d.CallID); c != nil {
				c.addSeq(ev.Seq)
			}
		}
	case lt.EventMonitorFinding:
		d, err := decode[lt.MonitorFindingData](ev)
		if err != nil {
			return
		}
		for _, seq := range d.Evidence {
			t.flagSeq(s, &d, seq)
		}
	case lt.EventMonitorReviewed:
		// The model monitor's warn or pause before a call a rule let
		// through (a verdict it could not give is the engine's, not the
		// monitor's judgement, and flags nothing).
		d, err := decode[lt.MonitorReviewedData](ev)
		if err != nil || d.CallID == "" || d.Failed || (d.Verdict != lt.VerdictWarn && d.Verdict != lt.VerdictPause) {
			return
		}
		reason := fmt.Sprintf("the model monitor answered %s before the %s call %s it let run: %s", d.Verdict, d.Tool, d.CallID, strings.Join(d.Reasons, "; "))
		if c := t.ruleCall(d.CallID); c != nil && c.Rule != "" {
			t.tighten(c.Rule, reason)
		} else {
			t.flag(d.CallID, reason) // asked: flagged once a person let it run
		}
	}
}

func (c *RuleCall) addSeq(seq int64) {
	if len(c.Seqs) < maxRuleCallSeqs && !slices.Contains(c.Seqs, seq) {
		c.Seqs = append(c.Seqs, seq)
	}
}

// flagSeq flags the rule of the call whose event seq finding d names, or
// the call, until its rule is known.
func (t *Tally) flagSeq(s *State, d *lt.MonitorFindingData, seq int64) {
	for i := len(t.RuleCalls) - 1; i >= 0; i-- {
		c := &t.RuleCalls[i]
		if !slices.Contains(c.Seqs, seq) {
			continue
		}
		reason := tightenReason(d, c.Call, c.Tool)
		if c.Rule != "" {
			t.tighten(c.Rule, reason)
		} else {
			t.flag(c.Call, reason)
		}
		return
	}
	// A call of the current step, its policy not evaluated yet.
	if s.Step == nil {
		return
	}
	for _, c := range s.Step.Calls {
		if c.ArgumentsSeq == seq {
			t.flag(c.ID, tightenReason(d, c.ID, c.Tool))
			return
		}
	}
}

func (t *Tally) flag(call, reason string) {
	if t.Flagged == nil {
		t.Flagged = map[string]string{}
	}
	if _, ok := t.Flagged[call]; ok || len(t.Flagged) >= maxFlaggedCalls {
		return
	}
	t.Flagged[call] = reason
}

// tightenReason says which detector flagged which call, and what it saw.
func tightenReason(d *lt.MonitorFindingData, call, tool string) string {
	return fmt.Sprintf("the trajectory monitor (%s) flagged the %s call %s it let run: %s", d.Detector, tool, call, d.Summary)
}
