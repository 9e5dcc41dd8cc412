package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// personAsks are the required action types that need a person: a function
// call is answered by the application.
var personAsks = []lt.ActionType{lt.ActionApproval, lt.ActionInput, lt.ActionInDoubt, lt.ActionBudget, lt.ActionBrowserPermission}

// projection is the part of a stored journal.State a report reads. Its
// JSON names are State's (a test holds them to it); decoding only these
// skips the allocations of turns, steps and pending actions.
type projection struct {
	Session   lt.Session      `json:"session"`
	TurnCount int             `json:"turn_count"`
	Children  []journal.Child `json:"children"`
	Tally     journal.Tally   `json:"tally"`
}

// task is one record with what the totals need beside it.
type task struct {
	rec lt.TaskRecord
	// own is the session's own usage: without sub-agents' roll-up, nor
	// what a fork inherited.
	own lt.Usage
	// approvals is how each policy rule's approvals went in the session.
	approvals map[string]*journal.RuleApprovals
	// tighten names the rules whose calls the trajectory monitor flagged
	// in the session, and why (journal.Tally.Tighten).
	tighten map[string]string
}

// newTask builds the record of a stored session; now ends the duration of
// a task still at work.
func newTask(row *store.SessionRow, now time.Time) (*task, error) {
	var p projection
	if len(row.State) > 0 {
		if err := json.Unmarshal(row.State, &p); err != nil {
			return nil, fmt.Errorf("decode the state of session %s: %w", row.ID, err)
		}
	}
	s := &p.Session
	usage := s.Usage
	if in := p.Tally.Inherited; in != nil {
		usage.Sub(*in)
	}
	var children lt.Usage
	for _, c := range p.Children {
		children.Add(c.Usage)
	}
	own := usage
	own.Sub(children)

	status := lt.SessionStatus(row.Status)
	if s.Status != "" {
		status = s.Status
	}
	// The session's own creation time, as the API shows it (a fork's is
	// when it was forked); the row's, which the window selects on, is the
	// same to within the fork's copying.
	created := row.CreatedAt.UTC()
	if !s.CreatedAt.IsZero() {
		created = s.CreatedAt.UTC()
	}
	r := lt.TaskRecord{
		ID: row.ID, Agent: s.Agent, ParentID: s.ParentID, Goal: s.Goal, Status: status,
		StopReason: s.StopReason, CreatedAt: created, Review: s.Review, Turns: p.TurnCount,
		Subagents: len(p.Children), Usage: usage, CostUSD: usage.CostUSD,
		ModelCostUSD: own.CostUSD, SubagentCostUSD: children.CostUSD, MonitorCostUSD: usage.MonitorCostUSD,
		Retries:          p.Tally.Retries,
		AsksByType:       map[lt.ActionType]int{},
		DecisionsByActor: slices.Clone(p.Tally.Decisions),
	}
	sortActorCounts(r.DecisionsByActor)
	if r.Agent.Name == "" {
		r.Agent = lt.AgentRef{Name: row.AgentName, Version: row.AgentVersion}
	}
	if r.ParentID == nil && row.ParentID != "" {
		id := row.ParentID
		r.ParentID = &id
	}
	for _, t := range personAsks {
		if n := p.Tally.Asks[t]; n > 0 {
			r.AsksByType[t] = n
			r.Asks += n
		}
	}
	r.InputComplete = p.Tally.Asks[lt.ActionInput] == 0
	if s.Review != nil {
		accepted := s.Review.Accepted
		r.Accepted = &accepted
	}

	end := now
	if status.Terminal() {
		// A session projected before the tally existed has no end time:
		// its last update is the closest the projection knows.
		end = s.UpdatedAt
		if e := p.Tally.EndedAt; e != nil {
			end = *e
		}
		e := end.UTC()
		r.EndedAt = &e
	}
	r.DurationSeconds = max(0, end.Sub(created).Seconds())

	if c := p.Tally.Checkpoint; c != nil {
		r.LastCheckpoint = &lt.TaskCheckpoint{ID: c.ID, Name: c.Name, Kind: c.Kind, TurnID: c.TurnID, Step: c.Step, At: c.At}
	} else if s.LastCheckpoint != nil {
		r.LastCheckpoint = &lt.TaskCheckpoint{ID: *s.LastCheckpoint}
	}
	return &task{rec: r, own: own, approvals: p.Tally.Approvals, tighten: p.Tally.Tighten}, nil
}

// sortActorCounts orders counts most first, then by name, role and key:
// a stable order for people to read and for golden files.
func sortActorCounts(counts []lt.ActorCount) {
	slices.SortFunc(counts, func(a, b lt.ActorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Actor.Name, b.Actor.Name),
			cmp.Compare(a.Actor.Role, b.Actor.Role), cmp.Compare(a.Actor.KeyID, b.Actor.KeyID))
	})
}
