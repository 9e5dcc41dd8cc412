package journal

import (
	"encoding/json"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Tally is what a session's journal says about how its work went, beyond
// its usage: the required actions it raised, the failures it retried, the
// latest checkpoint it reached and when it last stopped working. Reports
// (internal/report) read it from the projection, so a report over
// thousands of sessions never scans a journal.
//
// A fork starts a new tally: the copied prefix of its journal is its
// origin's work, counted in the origin's record. Inherited keeps the usage
// the fork came with, so that its own cost is Usage minus Inherited and a
// report over both sessions does not count that money twice.
type Tally struct {
	// Asks counts the required actions raised, by type (function calls
	// included: a report decides which of them needed a person).
	Asks map[lt.ActionType]int `json:"asks,omitempty"`
	// Retries counts failed attempts that were tried again: model.failed
	// and tool.failed with retry set.
	Retries int `json:"retries,omitempty"`
	// Checkpoint describes the latest checkpoint (Session.LastCheckpoint).
	Checkpoint *CheckpointBrief `json:"checkpoint,omitempty"`
	// EndedAt is when the session last reached a terminal status (idle,
	// failed, cancelled); nil while a turn is queued or under way.
	EndedAt *time.Time `json:"ended_at,omitempty"`
	// Inherited is the usage a fork was made with (nil: not a fork).
	Inherited *lt.Usage `json:"inherited,omitempty"`
	// Decisions counts the decisions people made, by actor, in the order
	// they first decided (decisionEvents).
	Decisions []lt.ActorCount `json:"decisions,omitempty"`
	// Approvals counts, per policy rule (lt.Action.Policy), the approvals
	// it asked for and how they were decided: approval fatigue, for the
	// report (internal/report).
	Approvals map[string]*RuleApprovals `json:"approvals,omitempty"`
	// OpenApprovals are the approvals of a rule still undecided, by action
	// id: when each was asked, to time its decision.
	OpenApprovals map[string]OpenApproval `json:"open_approvals,omitempty"`
	// Tighten names, per policy rule, why the trajectory monitor flagged a
	// call the rule allowed or approved (tighten.go): a candidate to
	// tighten, for the report. RuleCalls and Flagged link the two.
	Tighten   map[string]string `json:"tighten,omitempty"`
	RuleCalls []RuleCall        `json:"rule_calls,omitempty"`
	Flagged   map[string]string `json:"flagged,omitempty"`
}

// MaxDecideTimes bounds the decision times one session keeps per rule
// (RuleApprovals.DecideMS): the first ones are kept, the count goes on.
const MaxDecideTimes = 256

// RuleApprovals is how one policy rule's approvals went in a session.
type RuleApprovals struct {
	// Asks counts the approvals the rule asked for.
	Asks int `json:"asks"`
	// Decided counts those resolved (approved, rejected, expired, or
	// stopped by a cancel); Approved those approved (edited or not).
	Decided  int `json:"decided"`
	Approved int `json:"approved"`
	// DecideMS is how long each decided approval waited, in milliseconds
	// from its action.required to its action.resolved, the first
	// MaxDecideTimes of them.
	DecideMS []int64 `json:"decide_ms,omitempty"`
}

// OpenApproval is an approval asked for and not yet decided.
type OpenApproval struct {
	Rule string    `json:"rule"`
	At   time.Time `json:"at"`
}

// countApproval folds an approval's request and its resolution into the
// rule's counts. Approvals without a rule (a journal older than
// Action.Policy) are not counted.
func (t *Tally) countApproval(ev *event) {
	switch ev.Type {
	case lt.EventActionRequired:
		d, err := decode[lt.ActionRequiredData](ev)
		if err != nil || d.Action.Type != lt.ActionApproval || d.Action.Policy == "" {
			return
		}
		if t.Approvals == nil {
			t.Approvals = make(map[string]*RuleApprovals)
		}
		if t.OpenApprovals == nil {
			t.OpenApprovals = make(map[string]OpenApproval)
		}
		r := t.Approvals[d.Action.Policy]
		if r == nil {
			r = &RuleApprovals{}
			t.Approvals[d.Action.Policy] = r
		}
		r.Asks++
		t.OpenApprovals[d.Action.ID] = OpenApproval{Rule: d.Action.Policy, At: ev.Time}
	case lt.EventActionResolved:
		d, err := decode[lt.ActionResolvedData](ev)
		if err != nil {
			return
		}
		open, ok := t.OpenApprovals[d.ActionID]
		if !ok {
			return
		}
		delete(t.OpenApprovals, d.ActionID)
		if len(t.OpenApprovals) == 0 {
			t.OpenApprovals = nil
		}
		r := t.Approvals[open.Rule]
		r.Decided++
		if d.Decision.Decision == lt.DecisionApprove {
			r.Approved++
		}
		if len(r.DecideMS) < MaxDecideTimes {
			r.DecideMS = append(r.DecideMS, max(0, ev.Time.Sub(open.At).Milliseconds()))
		}
	}
}

// decisionEvents are the events that carry a person's decision, counted
// per actor. A pause counts once: its request, or its session.paused
// when it took effect without one (a parked session).
var decisionEvents = map[string]bool{
	lt.EventActionResolved: true, lt.EventSessionReviewed: true, lt.EventSessionCancelRequested: true,
	lt.EventTurnSteered: true, lt.EventBudgetUpdated: true, lt.EventSessionPauseRequested: true,
	lt.EventSessionPaused: true, lt.EventSessionResumed: true, lt.EventWorkspaceChanged: true,
	lt.EventConstraintAdded: true,
}

// countDecision counts ev's actor, if it carries one.
func (t *Tally) countDecision(s *State, ev *event) {
	if ev.Type == lt.EventSessionPaused && s.Pause != nil && s.Pause.Requested {
		return
	}
	var d struct {
		Actor *lt.Actor `json:"actor"`
		// Parent: a pause or resume that came with the parent's (one
		// decision, counted in the session the person acted on).
		Parent string `json:"parent"`
	}
	if json.Unmarshal(ev.Data, &d) != nil || d.Actor == nil || d.Parent != "" {
		return
	}
	for i := range t.Decisions {
		if t.Decisions[i].Actor == *d.Actor {
			t.Decisions[i].Count++
			return
		}
	}
	t.Decisions = append(t.Decisions, lt.ActorCount{Actor: *d.Actor, Count: 1})
}

// CheckpointBrief names a checkpoint and where it stands.
type CheckpointBrief struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Kind is step, turn or named (lt.Checkpoint.Kind).
	Kind   string    `json:"kind"`
	TurnID string    `json:"turn_id,omitempty"`
	Step   int       `json:"step,omitempty"`
	At     time.Time `json:"at"`
}

// AsksOf returns how many required actions of the given types were raised.
func (t *Tally) AsksOf(types ...lt.ActionType) int {
	n := 0
	for _, typ := range types {
		n += t.Asks[typ]
	}
	return n
}

// tally folds an event that Apply accepted into s.Tally. It never fails:
// apply already decoded the same data.
func tally(s *State, ev *event) {
	t := &s.Tally
	if decisionEvents[ev.Type] {
		t.countDecision(s, ev)
	}
	t.countApproval(ev)
	t.linkRules(s, ev)
	switch ev.Type {
	case lt.EventActionRequired:
		if d, err := decode[lt.ActionRequiredData](ev); err == nil && d.Action.Type != "" {
			if t.Asks == nil {
				t.Asks = make(map[lt.ActionType]int)
			}
			t.Asks[d.Action.Type]++
		}
	case lt.EventModelFailed:
		if d, err := decode[lt.ModelFailedData](ev); err == nil && d.Retry {
			t.Retries++
		}
	case lt.EventToolFailed:
		if d, err := decode[lt.ToolFailedData](ev); err == nil && d.Retry {
			t.Retries++
		}
	case lt.EventCheckpointCreated:
		if d, err := decode[lt.CheckpointCreatedData](ev); err == nil {
			c := d.Checkpoint
			if c.CreatedAt.IsZero() {
				c.CreatedAt = ev.Time
			}
			t.Checkpoint = &CheckpointBrief{ID: c.ID, Name: c.Name, Kind: c.Kind, TurnID: c.TurnID, Step: c.Step, At: c.CreatedAt}
		}
	case lt.EventSessionStatusChanged:
		if s.Session.Status.Terminal() {
			at := ev.Time
			t.EndedAt = &at
		} else {
			t.EndedAt = nil
		}
	case lt.EventSessionForked:
		u := s.Session.Usage
		*t = Tally{Checkpoint: t.Checkpoint, Inherited: &u}
	}
}
