package report

import (
	"cmp"
	"slices"
	"time"

	"github.com/longhaul-dev/longhaul/internal/journal"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Approval fatigue: per policy rule, how often it asked across the
// window's tasks, how often people approved, and how long they took. A
// rule approved every time it asked, often enough, costs attention for
// nothing a person changed: it is flagged as a candidate to relax. The
// counts come from each session's tally (journal.RuleApprovals).

// ruleFigures sums the tasks' approvals per rule.
type ruleFigures map[string]*ruleSum

type ruleSum struct {
	asks, decided, approved int
	decideMS                []int64
}

// add sums one task's approvals.
func (f ruleFigures) add(approvals map[string]*journal.RuleApprovals) {
	for rule, a := range approvals {
		if a == nil {
			continue
		}
		s := f[rule]
		if s == nil {
			s = &ruleSum{}
			f[rule] = s
		}
		s.asks += a.Asks
		s.decided += a.Decided
		s.approved += a.Approved
		s.decideMS = append(s.decideMS, a.DecideMS...)
	}
}

// figures returns the rules' figures, most asks first, then by name; a
// rule asked at least relaxAfter times and approved every time is flagged
// to relax.
func (f ruleFigures) figures(relaxAfter int) []lt.PolicyApprovals {
	out := make([]lt.PolicyApprovals, 0, len(f))
	for rule, s := range f {
		p := lt.PolicyApprovals{Rule: rule, Asks: s.asks, Decided: s.decided, Approved: s.approved}
		if s.decided > 0 {
			rate := float64(s.approved) / float64(s.decided)
			p.ApproveRate = &rate
		}
		if m, ok := medianSeconds(s.decideMS); ok {
			p.MedianDecideSeconds = &m
		}
		p.Relax = s.asks > 0 && s.asks >= relaxAfter && s.approved == s.asks
		out = append(out, p)
	}
	sortPolicies(out)
	return out
}

// sortPolicies orders rules most asks first, then by name.
func sortPolicies(ps []lt.PolicyApprovals) {
	slices.SortFunc(ps, func(a, b lt.PolicyApprovals) int {
		return cmp.Or(cmp.Compare(b.Asks, a.Asks), cmp.Compare(a.Rule, b.Rule))
	})
}

// medianSeconds is the median of ms in seconds (the mean of the middle two
// of an even count).
func medianSeconds(ms []int64) (float64, bool) {
	if len(ms) == 0 {
		return 0, false
	}
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	mid := len(sorted) / 2
	m := time.Duration(sorted[mid]) * time.Millisecond
	if len(sorted)%2 == 0 {
		m = (time.Duration(sorted[mid-1]) + time.Duration(sorted[mid])) * time.Millisecond / 2
	}
	return m.Seconds(), true
}

// flagTighten marks the rules the trajectory monitor flagged
// (Config.ToTighten); a flagged rule that never asked in the window is
// listed too, with no asks.
func flagTighten(t *lt.TaskTotals, flagged map[string]string) {
	for rule, reason := range flagged {
		i := slices.IndexFunc(t.Policies, func(p lt.PolicyApprovals) bool { return p.Rule == rule })
		if i < 0 {
			t.Policies = append(t.Policies, lt.PolicyApprovals{Rule: rule})
			i = len(t.Policies) - 1
		}
		t.Policies[i].Tighten, t.Policies[i].TightenReason = true, reason
	}
	sortPolicies(t.Policies)
}
