package journal

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Apply folds one event into s and records the projection rows it touched in
// ch (which may be nil). It fails only on an event that contradicts the state
// (a programming error in the writer, or a corrupt journal): the caller must
// then not persist anything.
//
// The payload is the one e carries when its writer kept it
// (lt.Event.WithPayload), or else Data decoded: the two give the same state
// (TestTypedPayloadsApplyAsDecoded; LONGHAUL_CHECK_PAYLOADS checks every
// Apply of a run both ways, checkpayload.go).
func Apply(s *State, e lt.Event, ch *Changes) error {
	if checkPayloads && e.Payload() != nil {
		return applyBothWays(s, e, ch)
	}
	return applyEvent(s, e, ch)
}

func applyEvent(s *State, e lt.Event, ch *Changes) error {
	ev := &event{Event: e, decoded: e.Payload()}
	if err := apply(s, ev, ch); err != nil {
		return fmt.Errorf("apply %s (seq %d): %w", ev.Type, ev.Seq, err)
	}
	tally(s, ev)
	trackWorkspace(s, ev)
	s.Session.LastEventSeq = ev.Seq
	if !ev.Time.IsZero() {
		s.Session.UpdatedAt = ev.Time
	}
	return nil
}

// event is an event being applied, its payload decoded at most once per
// type: apply, tally and trackWorkspace each read the payload of some
// types (a tool.started, a checkpoint.created), and every event a runner
// writes is applied as it is added to its batch.
type event struct {
	lt.Event
	// decoded is the payload the event carries, or as decode first
	// decoded it, or nil.
	decoded any
}

// decode returns ev's payload as a T, decoding it only if it was not
// decoded as a T already. Callers read the value or copy from it: a T
// holding slices or maps shares them with the other callers.
func decode[T any](ev *event) (T, error) {
	if v, ok := ev.decoded.(T); ok {
		return v, nil
	}
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		return v, fmt.Errorf("decode data: %w", err)
	}
	if ev.decoded == nil {
		ev.decoded = v
	}
	return v, nil
}

func apply(s *State, ev *event, ch *Changes) error {
	switch ev.Type {
	case lt.EventSessionCreated:
		d, err := decode[lt.SessionCreatedData](ev)
		if err != nil {
			return err
		}
		s.Session = lt.Session{
			ID: ev.SessionID, Status: lt.SessionQueued, Agent: d.Agent, Input: d.Input, Goal: d.Goal,
			Constraints: d.Constraints, AcceptanceCriteria: d.AcceptanceCriteria, Budget: d.Budget,
			Metadata: d.Metadata, WebhookURL: d.WebhookURL, CreatedAt: ev.Time, Project: d.Project,
			CreatedBy: d.Actor,
		}
		if d.ParentID != "" {
			p := d.ParentID
			s.Session.ParentID = &p
		}
		s.Workspace, s.Depth = d.Workspace, d.Depth
		s.IdleStopSeconds = d.IdleStopSeconds
	case lt.EventSessionStatusChanged:
		d, err := decode[lt.SessionStatusChangedData](ev)
		if err != nil {
			return err
		}
		s.Session.Status = d.To
		if d.StopReason != "" {
			r := d.StopReason
			s.Session.StopReason = &r
		} else if d.To != lt.SessionFailed && d.To != lt.SessionCancelled {
			s.Session.StopReason = nil
		}
	case lt.EventSessionCancelRequested:
		d, err := decode[lt.SessionCancelRequestedData](ev)
		if err != nil {
			return err
		}
		s.Cancel = &d
	case lt.EventSessionPauseRequested, lt.EventSessionPaused, lt.EventSessionResumed:
		return applyPause(s, ev)
	case lt.EventTurnCreated:
		d, err := decode[lt.TurnCreatedData](ev)
		if err != nil {
			return err
		}
		t := lt.Turn{ID: d.TurnID, SessionID: ev.SessionID, Index: d.Index, Status: lt.TurnQueued, Input: d.Input, CreatedAt: ev.Time}
		s.Turns = append(s.Turns, t)
		s.TurnCount++
		if len(s.Turns) == 1 {
			s.Session.CurrentTurnID = t.ID
		}
		putTurn(ch, t)
	case lt.EventTurnStarted:
		t, err := currentTurn(s, ev)
		if err != nil {
			return err
		}
		d, err := decode[lt.TurnStartedData](ev)
		if err != nil {
			return err
		}
		t.Status = lt.TurnRunning
		at := ev.Time
		t.StartedAt = &at
		s.TurnDeadline = d.Deadline
		s.Step, s.ModelAttempt, s.OpenModelCalls = nil, 0, nil
		s.ToolErrorStreak, s.LastCallKey, s.LastCallRepeat = 0, "", 0
		s.Verification, s.ForceCompact, s.CheckpointStep, s.ContextRetryStep = nil, false, 0, 0
		s.Session.CurrentTurnID = t.ID
		putTurn(ch, *t)
	case lt.EventTurnCompleted, lt.EventTurnFailed, lt.EventTurnCancelled:
		if ev.Type == lt.EventTurnCompleted && s.Steer.Undelivered() {
			// A person's message came as the turn was ending: the
			// model reads it first (the writer starts over).
			return fmt.Errorf("turn %s cannot complete: a steering message has not reached the model", ev.TurnID)
		}
		return applyTurnEnd(s, ev, ch)
	case lt.EventModelRequested:
		// Nothing else changes until the model answers: a crash here
		// means "call again", as the next attempt.
		d, err := decode[lt.ModelRequestedData](ev)
		if err != nil {
			return err
		}
		applySteersSent(s, d)
		modelCallOpened(s, ModelRequest{Purpose: d.Purpose, Step: d.Step, Attempt: d.Attempt})
	case lt.EventTurnSteered:
		return applySteered(s, ev)
	case lt.EventModelResponded:
		d, err := decode[lt.ModelRespondedData](ev)
		if err != nil {
			return err
		}
		t, err := currentTurn(s, ev)
		if err != nil {
			return err
		}
		s.Step = &Step{N: d.Step, TurnID: t.ID, Text: d.Text}
		s.ModelPosition++
		s.ModelAttempt = 0
		modelCallEnded(s, "")
		u := d.Usage
		u.CostUSD = d.CostUSD
		u.ModelCalls = 1
		u.ToolCalls = 0
		s.Session.Usage.Add(u)
		t.Usage.Add(u)
		t.Steps = d.Step
		putTurnFigures(ch, *t)
	case lt.EventModelFailed:
		d, err := decode[lt.ModelFailedData](ev)
		if err != nil {
			return err
		}
		switch {
		case d.Consumed && d.Purpose == lt.PurposeMonitor:
			s.MonitorPosition++
		case d.Consumed:
			s.ModelPosition++
		}
		// Attempts a crash cut before this one count as made.
		s.ModelAttempt = max(s.ModelAttempt+1, d.Attempt)
		modelCallEnded(s, d.Purpose)
		if d.Kind == "context_length_exceeded" && d.Retry && d.Purpose == "" {
			// The retry after a compaction is a fresh start, not attempt n+1.
			s.ForceCompact, s.ContextRetryStep, s.ModelAttempt = true, d.Step, 0
		}
		if d.Interrupted == lt.InterruptedSteered {
			// Made again with a person's message: no failure of the model.
			s.ModelAttempt = 0
		}
		u := lt.Usage{ModelCalls: 1}
		if d.Usage != nil {
			// An abandoned call still counts what it was sent.
			u = *d.Usage
			u.ModelCalls, u.ToolCalls = 1, 0
		}
		if d.Purpose == lt.PurposeMonitor {
			u.MonitorCostUSD = u.CostUSD
		}
		s.Session.Usage.Add(u)
		if t := s.CurrentTurn(); t != nil {
			t.Usage.Add(u)
			putTurnFigures(ch, *t)
		}
	case lt.EventToolRequested:
		d, err := decode[lt.ToolRequestedData](ev)
		if err != nil {
			return err
		}
		if s.Step == nil || s.Step.N != d.Step || d.Index != len(s.Step.Calls) {
			return fmt.Errorf("tool call %d of step %d out of order", d.Index, d.Step)
		}
		key := d.Tool + "\x00" + d.ArgumentsSHA256
		if key == s.LastCallKey {
			s.LastCallRepeat++
		} else {
			s.LastCallKey, s.LastCallRepeat = key, 1
		}
		s.Step.Calls = append(s.Step.Calls, Call{
			Index: d.Index, ID: d.CallID, Tool: d.Tool, Server: d.Server, Kind: d.Kind, Class: d.Class,
			Arguments: d.Arguments, ArgumentsSHA256: d.ArgumentsSHA256, ArgumentsSeq: ev.Seq, Status: CallRequested, Repeat: s.LastCallRepeat,
		})
	case lt.EventPolicyDecided:
		d, err := decode[lt.PolicyDecidedData](ev)
		if err != nil {
			return err
		}
		c := s.Call(d.Step, d.Index)
		if c == nil || c.ID != d.CallID {
			return fmt.Errorf("policy.decided for unknown call %s", d.CallID)
		}
		c.Policy = d.Decision
	case lt.EventWaitStarted:
		d, err := decode[lt.WaitStartedData](ev)
		if err != nil {
			return err
		}
		if s.Call(d.Step, d.Index) == nil {
			return fmt.Errorf("wait for unknown call %s", d.CallID)
		}
		w := &Wait{WaitStartedData: d}
		w.Satisfied = agentsWaitOver(s, w)
		if d.Kind == lt.WaitSignal {
			for i, sig := range s.Signals {
				if sig.Name == d.Name {
					got := sig
					w.Signal = &got
					s.Signals = append(s.Signals[:i:i], s.Signals[i+1:]...)
					break
				}
			}
		}
		s.Wait = w
	case lt.EventSignalReceived:
		d, err := decode[lt.SignalReceivedData](ev)
		if err != nil {
			return err
		}
		if w := s.Wait; w != nil && w.Kind == lt.WaitSignal && w.Name == d.Name && w.Signal == nil {
			w.Signal = &d
		} else {
			s.Signals = append(s.Signals, d)
			if len(s.Signals) > maxKeptSignals {
				s.Signals = s.Signals[len(s.Signals)-maxKeptSignals:]
			}
		}
	case lt.EventSubagentSpawned:
		d, err := decode[lt.SubagentSpawnedData](ev)
		if err != nil {
			return err
		}
		c := s.Child(d.ChildID)
		if c == nil {
			s.Children = append(s.Children, Child{ID: d.ChildID})
			c = &s.Children[len(s.Children)-1]
		}
		// A child can report before its parent records the spawn (its
		// report merged first): it keeps what the report said.
		c.TurnID, c.Step, c.Index, c.CallID = ev.TurnID, d.Step, d.Index, d.CallID
		if !c.Done {
			c.Budget = d.Budget
		}
	case lt.EventSubagentCompleted:
		d, err := decode[lt.SubagentCompletedData](ev)
		if err != nil {
			return err
		}
		applySubagentCompleted(s, d, ch)
	case lt.EventSubagentReported:
		d, err := decode[lt.SubagentReportedData](ev)
		if err != nil {
			return err
		}
		if s.ReportDue != nil && s.ReportDue.TurnID == d.TurnID {
			s.ReportDue = nil
		}
	case lt.EventSubagentCancelRequested:
		d, err := decode[lt.SubagentCancelRequestedData](ev)
		if err != nil {
			return err
		}
		if c := s.Child(d.ChildID); c != nil {
			c.CancelRequested = true
		}
		if w := s.Wait; w != nil && !w.Satisfied {
			w.Satisfied = agentsWaitOver(s, w)
		}
	case lt.EventSessionForked:
		d, err := decode[lt.SessionForkedData](ev)
		if err != nil {
			return err
		}
		f := d.From
		s.Session.ForkedFrom = &f
		// A fork is a root of its own: the original's parent, workspace
		// and sub-agents are not its to report to, work in or wait for.
		s.Session.ParentID, s.Workspace, s.Depth, s.ReportDue, s.Children = nil, "", 0, nil, nil
		// The fork's wall clock (budgets) starts when it was made.
		s.Session.CreatedAt, s.PausedFor, s.Pause = ev.Time, 0, nil
		// Who forked it created it: the creator a not_creator approver
		// is told apart from.
		s.Session.CreatedBy = d.Actor
	case lt.EventSessionReviewed:
		d, err := decode[lt.SessionReviewedData](ev)
		if err != nil {
			return err
		}
		r := d.Review
		s.Session.Review = &r
	case lt.EventConstraintAdded:
		d, err := decode[lt.ConstraintAddedData](ev)
		if err != nil {
			return err
		}
		s.Session.Constraints = append(s.Session.Constraints, d.Constraint)
	case lt.EventContextCompacted:
		d, err := decode[lt.ContextCompactedData](ev)
		if err != nil {
			return err
		}
		s.ForceCompact = false
		if d.Snapshot != nil {
			s.ContextSnapshot = &ContextSnapshot{Seq: ev.Seq, SHA256: d.Snapshot.SHA256}
		}
		sideCall(s, lt.PurposeCompaction, d.Usage, d.CostUSD, ch)
	case lt.EventAcceptanceVerified:
		d, err := decode[lt.AcceptanceVerifiedData](ev)
		if err != nil {
			return err
		}
		v := d.Verdict
		s.Verification = &Verification{Step: d.Step, Verdict: &v}
		sideCall(s, lt.PurposeVerification, d.Usage, d.CostUSD, ch)
	case lt.EventMonitorReviewed:
		return applyMonitorReviewed(s, ev, ch)
	case lt.EventMonitorHeld:
		d, err := decode[lt.MonitorHeldData](ev)
		if err != nil {
			return err
		}
		s.HeldFor = d.ActionID
	case lt.EventBudgetUpdated:
		d, err := decode[lt.BudgetUpdatedData](ev)
		if err != nil {
			return err
		}
		s.Session.Budget = d.Budget
	case lt.EventBudgetWarning:
		d, err := decode[lt.BudgetWarningData](ev)
		if err != nil {
			return err
		}
		if s.BudgetWarned == nil {
			s.BudgetWarned = make(map[string]float64)
		}
		s.BudgetWarned[d.Limit.Name] = d.Limit.Max
	case lt.EventToolStarted:
		return applyToolStarted(s, ev, ch)
	case lt.EventToolCompleted, lt.EventToolFailed:
		return applyToolEnd(s, ev, ch)
	case lt.EventMCPServerLost:
		d, err := decode[lt.MCPServerLostData](ev)
		if err != nil {
			return err
		}
		// The call stays started (its outcome is unknown); what is known is
		// why, for whoever settles it.
		if c := s.Call(d.Step, d.Index); c != nil && c.ID == d.CallID {
			c.LostServer, c.LostError = d.Server, d.Error
		}
	case lt.EventEffectInDoubt:
		d, err := decode[lt.EffectInDoubtData](ev)
		if err != nil {
			return err
		}
		e, _ := s.OpenEffect(d.EffectID)
		if e == nil {
			return fmt.Errorf("effect %s is not open", d.EffectID)
		}
		e.Status = lt.EffectInDoubt
		e.Result = "in doubt: " + d.Reason
		putEffect(ch, *e)
	case lt.EventActionRequired:
		d, err := decode[lt.ActionRequiredData](ev)
		if err != nil {
			return err
		}
		a := d.Action
		a.Status = lt.ActionPending
		if a.CallID != "" {
			c := s.CallByID(a.Step, a.CallID)
			if c == nil {
				return fmt.Errorf("action %s names unknown call %s", a.ID, a.CallID)
			}
			c.Status = CallAwaitingAction
			c.ActionID = a.ID
		}
		s.Pending = append(s.Pending, a)
		putAction(ch, a)
	case lt.EventActionResolved:
		return applyActionResolved(s, ev, ch)
	case lt.EventArtifactCreated:
		d, err := decode[lt.ArtifactCreatedData](ev)
		if err != nil {
			return err
		}
		if s.ArtifactVersions == nil {
			s.ArtifactVersions = make(map[string]int)
		}
		s.ArtifactVersions[d.Artifact.Name] = d.Artifact.Version
		if s.ArtifactIDs == nil {
			s.ArtifactIDs = make(map[string]string)
		}
		s.ArtifactIDs[d.Artifact.Name] = d.Artifact.ID
		ch.put(Doc{Kind: DocArtifact, ID: d.Artifact.ID, Value: d.Artifact, CreatedAt: d.Artifact.CreatedAt})
	case lt.EventCheckpointCreated:
		d, err := decode[lt.CheckpointCreatedData](ev)
		if err != nil {
			return err
		}
		id := d.Checkpoint.ID
		s.Session.LastCheckpoint = &id
		if d.Checkpoint.Snapshot != "" {
			s.LastSnapshot, s.LastSnapshotCheckpoint = d.Checkpoint.Snapshot, id
			s.EnvironmentSnapshot, s.EnvironmentSnapshotPassed, s.EnvironmentSnapshotChanges = "", false, 0
			// The runner brings its copy up to date before it snapshots
			// it (engine, workspaceLost): the snapshot holds them.
			s.PersonChanges = nil
		}
		if d.Checkpoint.Kind == lt.CheckpointStep {
			s.CheckpointStep = d.Checkpoint.Step
		}
		ch.put(Doc{Kind: DocCheckpoint, ID: id, Value: d.Checkpoint, CreatedAt: d.Checkpoint.CreatedAt})
	default:
		// Informational events (model.delta, budget.*, signals, ...) change no
		// projection; unknown types are kept for forward compatibility.
	}
	return nil
}

// applySubagentCompleted records a child's end: its usage rolls up (the
// part not rolled up before), its reservation is released, and a wait for
// it may be over. A report applied twice changes nothing.
func applySubagentCompleted(s *State, d lt.SubagentCompletedData, ch *Changes) {
	c := s.Child(d.ChildID)
	if c == nil {
		s.Children = append(s.Children, Child{ID: d.ChildID})
		c = &s.Children[len(s.Children)-1]
	}
	if c.ReportedTurn == d.TurnID && c.Done {
		return
	}
	delta := d.Usage
	delta.Sub(c.Usage)
	s.Session.Usage.Add(delta)
	if t := s.CurrentTurn(); t != nil {
		t.Usage.Add(delta)
		putTurnFigures(ch, *t)
	}
	r := d
	c.Usage, c.ReportedTurn, c.Done, c.Result = d.Usage, d.TurnID, true, &r
	if w := s.Wait; w != nil && !w.Satisfied {
		w.Satisfied = agentsWaitOver(s, w)
	}
}

// agentsWaitOver reports whether a wait on sub-agents is over: all (or
// any) of its children completed, or, for a spawn waiting for a slot,
// fewer than MaxRunning run.
func agentsWaitOver(s *State, w *Wait) bool {
	switch w.Kind {
	case lt.WaitSubagentSlot:
		return s.RunningChildren() < w.MaxRunning
	case lt.WaitAgents:
		done := 0
		for _, id := range w.IDs {
			if c := s.Child(id); c == nil || c.Done {
				done++
			}
		}
		if w.Mode == lt.WaitAny {
			return done > 0
		}
		return done == len(w.IDs)
	}
	return false
}

// maxKeptSignals bounds the signals a session keeps for waits to come.
const maxKeptSignals = 100

// sideCall accounts for a model call made for the loop rather than as a
// step (compaction, verification): it consumed a model position and counts
// in the usage like any call.
func sideCall(s *State, purpose string, u lt.Usage, cost float64, ch *Changes) {
	s.ModelPosition++
	s.ModelAttempt = 0
	modelCallEnded(s, purpose)
	u.CostUSD, u.ModelCalls, u.ToolCalls = cost, 1, 0
	s.Session.Usage.Add(u)
	if t := s.CurrentTurn(); t != nil {
		t.Usage.Add(u)
		putTurnFigures(ch, *t)
	}
}

func currentTurn(s *State, ev *event) (*lt.Turn, error) {
	t := s.CurrentTurn()
	if t == nil {
		return nil, fmt.Errorf("no unfinished turn")
	}
	if ev.TurnID != "" && ev.TurnID != t.ID {
		return nil, fmt.Errorf("turn %s is not the current turn %s", ev.TurnID, t.ID)
	}
	return t, nil
}

func applyTurnEnd(s *State, ev *event, ch *Changes) error {
	t, err := currentTurn(s, ev)
	if err != nil {
		return err
	}
	at := ev.Time
	t.CompletedAt = &at
	switch ev.Type {
	case lt.EventTurnCompleted:
		d, err := decode[lt.TurnCompletedData](ev)
		if err != nil {
			return err
		}
		t.Status, t.Output, t.Acceptance = lt.TurnCompleted, d.Output, d.Acceptance
	case lt.EventTurnFailed:
		d, err := decode[lt.TurnFailedData](ev)
		if err != nil {
			return err
		}
		r := d.StopReason
		t.Status, t.StopReason, t.Error = lt.TurnFailed, &r, d.Error
	case lt.EventTurnCancelled:
		r := lt.StopCancelled
		t.Status, t.StopReason = lt.TurnCancelled, &r
	}
	if t.Status != lt.TurnCompleted {
		voidTurn(s, t.ID, at, ch)
	}
	if s.Session.ParentID != nil {
		// A sub-agent tells its parent how the turn ended (see
		// State.ReportDue); its usage is read when it reports.
		r := &lt.SubagentCompletedData{ChildID: s.Session.ID, TurnID: t.ID, Status: t.Status, Output: t.Output, Error: t.Error}
		if t.StopReason != nil {
			r.StopReason = *t.StopReason
		}
		s.ReportDue = r
	}
	for i := range s.Children {
		if c := &s.Children[i]; c.TurnID == t.ID && c.Done {
			c.Result = nil // the turn that waited for it is over
		}
	}
	putTurn(ch, *t)
	s.Turns = s.Turns[1:]
	s.Step, s.ModelAttempt, s.Wait, s.TurnDeadline = nil, 0, nil, nil
	if len(s.Turns) > 0 {
		s.Session.CurrentTurnID = s.Turns[0].ID
	}
	if len(s.Turns) == 0 {
		s.Cancel = nil
		endPause(s, at) // nothing is left to pause
	}
	return nil
}

// voidTurn records what a turn that ended early (failed or cancelled)
// leaves behind: its pending actions are void, and an effect that may have
// run stays visible: an irreversible one in doubt, others failed.
func voidTurn(s *State, turnID string, at time.Time, ch *Changes) {
	kept := s.Pending[:0]
	for _, a := range s.Pending {
		if a.TurnID == turnID {
			a.Status = lt.ActionCancelled
			a.ResolvedAt = &at
			putAction(ch, a)
			continue
		}
		kept = append(kept, a)
	}
	s.Pending = kept
	for _, e := range s.OpenEffects {
		if e.TurnID != turnID {
			continue
		}
		if e.Class == lt.EffectIrreversible && e.Status != lt.EffectFailed {
			e.Status = lt.EffectInDoubt
			e.Resolution = "turn ended; outcome unknown"
			e.Result = "in doubt: the turn ended before its outcome was known"
		} else {
			e.Status = lt.EffectFailed
			if e.Error == "" {
				e.Error = "turn ended"
				e.Result = "failed: the turn ended while it ran"
			}
			e.FinishedAt = &at
		}
		putEffect(ch, e)
	}
	s.OpenEffects = dropTurnEffects(s.OpenEffects, turnID)
}

func dropTurnEffects(effects []lt.Effect, turnID string) []lt.Effect {
	kept := effects[:0]
	for _, e := range effects {
		if e.TurnID != turnID {
			kept = append(kept, e)
		}
	}
	return kept
}

func applyToolStarted(s *State, ev *event, ch *Changes) error {
	d, err := decode[lt.ToolStartedData](ev)
	if err != nil {
		return err
	}
	c := s.Call(d.Step, d.Index)
	if c == nil || c.ID != d.CallID {
		return fmt.Errorf("tool.started for unknown call %s", d.CallID)
	}
	if c.Status == CallDone {
		return fmt.Errorf("call %s already done", d.CallID)
	}
	c.Status, c.EffectID, c.IdempotencyKey, c.Attempts = CallStarted, d.EffectID, d.IdempotencyKey, d.Attempt
	c.LostServer, c.LostError = "", "" // a new attempt
	e, _ := s.OpenEffect(d.EffectID)
	if e == nil {
		s.OpenEffects = append(s.OpenEffects, lt.Effect{
			ID: d.EffectID, SessionID: ev.SessionID, TurnID: s.Step.TurnID, Step: d.Step, CallIndex: d.Index,
			CallID: d.CallID, Tool: d.Tool, Class: d.Class, ArgumentsSHA256: c.ArgumentsSHA256,
			IdempotencyKey: d.IdempotencyKey, StartedAt: ev.Time,
		})
		e = &s.OpenEffects[len(s.OpenEffects)-1]
	}
	e.Status, e.Attempts, e.Resolution = lt.EffectStarted, d.Attempt, ""
	// Again at every attempt: a person may have edited the arguments since.
	e.Summary, e.ArgumentsEventSeq = DescribeCall(c.Tool, c.Arguments), c.ArgumentsSeq
	s.Session.Usage.ToolCalls++
	if t := s.CurrentTurn(); t != nil {
		t.Usage.ToolCalls++
		putTurnFigures(ch, *t)
	}
	putEffect(ch, *e)
	return nil
}

func applyToolEnd(s *State, ev *event, ch *Changes) error {
	var step, index int
	var callID, effectID, errMsg, resolution string
	var output json.RawMessage
	retry := false
	if ev.Type == lt.EventToolCompleted {
		d, err := decode[lt.ToolCompletedData](ev)
		if err != nil {
			return err
		}
		step, index, callID, effectID, resolution, output = d.Step, d.Index, d.CallID, d.EffectID, d.Resolution, d.Output
	} else {
		d, err := decode[lt.ToolFailedData](ev)
		if err != nil {
			return err
		}
		step, index, callID, effectID, errMsg, resolution, output = d.Step, d.Index, d.CallID, d.EffectID, d.Error, d.Resolution, d.Output
		retry = d.Retry
	}
	result := DescribeResult(output, errMsg)
	c := s.Call(step, index)
	if c == nil || c.ID != callID {
		return fmt.Errorf("%s for unknown call %s", ev.Type, callID)
	}
	if c.Status == CallDone {
		return fmt.Errorf("call %s already done", callID)
	}
	if retry {
		// A transient failure: the call runs again with the same effect
		// and key; the effect stays open, its last error recorded.
		if c.Status != CallStarted || effectID == "" {
			return fmt.Errorf("retry of call %s that is not running", callID)
		}
		c.Status = CallRequested
		e, _ := s.OpenEffect(effectID)
		if e == nil {
			return fmt.Errorf("effect %s is not open", effectID)
		}
		e.Status, e.Error = lt.EffectFailed, errMsg
		e.Result, e.ResultEventSeq = result, ev.Seq
		putEffect(ch, *e)
		return nil
	}
	c.Status, c.Failed = CallDone, ev.Type == lt.EventToolFailed
	if s.Wait != nil && s.Wait.CallID == callID {
		s.Wait = nil
	}
	if c.Failed {
		s.ToolErrorStreak++
	} else {
		s.ToolErrorStreak = 0
	}
	if effectID == "" {
		return nil
	}
	e, i := s.OpenEffect(effectID)
	if e == nil {
		return fmt.Errorf("effect %s is not open", effectID)
	}
	at := ev.Time
	e.FinishedAt = &at
	e.Result, e.ResultEventSeq = result, ev.Seq
	switch {
	case resolution != "":
		e.Status, e.Resolution = lt.EffectResolved, resolution
		e.Result = "a person decided " + resolution + ": " + result
	case ev.Type == lt.EventToolFailed:
		e.Status, e.Error = lt.EffectFailed, errMsg
	default:
		e.Status, e.Error = lt.EffectSucceeded, ""
	}
	putEffect(ch, *e)
	s.OpenEffects = append(s.OpenEffects[:i], s.OpenEffects[i+1:]...)
	return nil
}

func applyActionResolved(s *State, ev *event, ch *Changes) error {
	d, err := decode[lt.ActionResolvedData](ev)
	if err != nil {
		return err
	}
	a, i := s.PendingAction(d.ActionID)
	if a == nil {
		return fmt.Errorf("action %s is not pending", d.ActionID)
	}
	at := ev.Time
	resolved := *a
	resolved.Status, resolved.ResolvedAt = lt.ActionResolved, &at
	resolved.Resolution, _ = json.Marshal(d.Decision)
	resolved.ResolvedBy = d.Actor
	putAction(ch, resolved)
	s.Pending = append(s.Pending[:i], s.Pending[i+1:]...)
	switch {
	case resolved.Type == lt.ActionApproval && d.Decision.Decision == lt.DecisionApprove:
		// Approved: the call runs, bound to the approved arguments.
		c := s.CallByID(resolved.Step, resolved.CallID)
		if c == nil || d.ArgumentsSHA256 == "" {
			return fmt.Errorf("approval %s binds no call", resolved.ID)
		}
		if len(d.Arguments) > 0 {
			c.Arguments, c.ArgumentsSHA256, c.ArgumentsSeq = d.Arguments, d.ArgumentsSHA256, ev.Seq
		}
		c.Status, c.ActionID, c.ApprovedSHA256 = CallRequested, "", d.ArgumentsSHA256
	case resolved.Type == lt.ActionBudget && d.Budget != nil:
		s.Session.Budget = *d.Budget
	case resolved.Type == lt.ActionEnvironmentConnection && d.Decision.Decision == lt.DecisionUnpin:
		// A person lets any matching runner take the environment: the
		// next open checks the copy it finds there against the journal
		// (restored from the last checkpoint when it lacks it).
		s.EnvironmentRunner, s.EnvironmentRunnerKey = "", ""
	case resolved.Type == lt.ActionBrowserPermission && d.Decision.Decision == lt.DecisionAllow:
		// Allowed: the call runs (again), its site granted for the call
		// or for the session.
		c := s.CallByID(resolved.Step, resolved.CallID)
		if c == nil {
			return fmt.Errorf("browser permission %s names no call", resolved.ID)
		}
		if d.Decision.Scope == lt.ScopeSession {
			if !slices.Contains(s.BrowserSites, resolved.Origin) {
				s.BrowserSites = append(s.BrowserSites, resolved.Origin)
			}
		} else if !slices.Contains(c.BrowserOnce, resolved.Origin) {
			c.BrowserOnce = append(c.BrowserOnce, resolved.Origin)
		}
		c.Status, c.ActionID = CallRequested, ""
	}
	if resolved.Type == lt.ActionInDoubt && d.Decision.Decision == lt.DecisionDidNotHappen {
		// A person says the effect did not happen: the call runs again, with
		// the same effect id and idempotency key.
		if c := s.CallByID(resolved.Step, resolved.CallID); c != nil {
			c.Status, c.ActionID = CallRequested, ""
		}
		if e, j := s.OpenEffect(resolved.EffectID); e != nil {
			e.Status, e.Resolution = lt.EffectResolved, lt.DecisionDidNotHappen
			e.Result = "a person decided it did not happen; it runs again"
			e.FinishedAt = &at
			putEffect(ch, *e)
			s.OpenEffects = append(s.OpenEffects[:j], s.OpenEffects[j+1:]...)
		}
	}
	return nil
}

func putTurn(ch *Changes, t lt.Turn) {
	ch.put(Doc{Kind: DocTurn, ID: t.ID, Status: string(t.Status), Value: t, CreatedAt: t.CreatedAt})
}

// putTurnFigures records a change of the current turn's figures alone (its
// steps, its usage): its row is written only when its status changes
// (created, started, ended), carrying the figures of that moment, or when
// the batch writes it anyway. In between, its live figures are the
// session's state's (State.Turns), which every append writes: the engine's
// reads of a turn take them from there (engine.ListTurns). Writing the row
// at every step, as it once was, cost a statement and a page of the WAL
// per step for figures the state already held.
func putTurnFigures(ch *Changes, t lt.Turn) {
	if ch == nil {
		return
	}
	if i := ch.find(DocTurn, t.ID); i >= 0 {
		ch.docs[i].Value = t
	}
}

func putAction(ch *Changes, a lt.Action) {
	ch.put(Doc{Kind: DocAction, ID: a.ID, Status: string(a.Status), Value: a, CreatedAt: a.CreatedAt})
}

func putEffect(ch *Changes, e lt.Effect) {
	ch.put(Doc{Kind: DocEffect, ID: e.ID, Status: string(e.Status), Value: e, CreatedAt: e.StartedAt})
}

// trackWorkspace keeps what the workspace's copies depend on: the node that
// last changed it and the people's changes no snapshot holds yet.
func trackWorkspace(s *State, ev *event) {
	switch ev.Type {
	case lt.EventToolStarted:
		if d, err := decode[lt.ToolStartedData](ev); err == nil && d.Class != lt.EffectRead {
			s.WorkspaceNode = ev.WorkerID
			// The workspace may hold more than the stop's snapshot now.
			s.EnvironmentSnapshotPassed = s.EnvironmentSnapshot != ""
		}
		s.IdleStopFailures = 0 // in use again
	case lt.EventEnvironmentRestored:
		s.WorkspaceNode = ev.WorkerID
		s.EnvironmentStopped = false
		s.UnrestoredLosses = 0
	case lt.EventEnvironmentLost:
		s.UnrestoredLosses++
		if s.lostWhereItLived(ev.WorkerID) {
			s.TurnLossSteps = append(s.TurnLossSteps, ev.Step)
			if n := len(s.TurnLossSteps); n > MaxTurnLossSteps {
				s.TurnLossSteps = append([]int(nil), s.TurnLossSteps[n-MaxTurnLossSteps:]...)
			}
		}
	case lt.EventTurnStarted:
		s.UnrestoredLosses, s.TurnLossSteps = 0, nil // a new turn tries again
	case lt.EventEnvironmentStopped:
		if d, err := decode[lt.EnvironmentStoppedData](ev); err == nil {
			// Freed: the next open may go to any matching runner, the
			// snapshot being on the server.
			if d.Snapshot != s.EnvironmentSnapshot {
				// Not the stopping's snapshot (none, or an untrusted
				// copy's ""): no person's change is known to be in it.
				s.EnvironmentSnapshotChanges = 0
			}
			s.EnvironmentStopped, s.EnvironmentSnapshot, s.EnvironmentRunner, s.EnvironmentRunnerKey = true, d.Snapshot, "", ""
			s.EnvironmentSnapshotPassed = false
		}
		s.IdleStopFailures = 0
	case lt.EventEnvironmentStopping:
		if d, err := decode[lt.EnvironmentStoppingData](ev); err == nil && d.Snapshot != "" {
			// Whether the stop that follows is journaled or not (its
			// reply lost after the runner removed the workspace), the
			// workspace is this snapshot: a copy made anew is restored
			// from it, not from the last checkpoint's.
			s.EnvironmentSnapshot, s.EnvironmentSnapshotPassed = d.Snapshot, false
			s.EnvironmentSnapshotChanges = d.PersonChangesThrough
		}
	case lt.EventEnvironmentStopFailed:
		s.IdleStopFailures++
	case lt.EventEnvironmentOpened:
		if d, err := decode[lt.EnvironmentOpenedData](ev); err == nil {
			s.EnvironmentRunner, s.EnvironmentRunnerKey = d.Runner, d.RunnerKeyID
		}
		s.IdleStopFailures = 0
	case lt.EventWorkspaceChanged:
		if d, err := decode[lt.WorkspaceChange](ev); err == nil {
			s.WorkspaceNode = ev.WorkerID
			s.PersonChanges = append(s.PersonChanges, PersonChange{Seq: ev.Seq, Op: d.Op, Path: d.Path, SHA256: d.SHA256, Size: d.Size, BasedOn: d.BasedOn})
		}
	case lt.EventWorkspaceChangeNotApplied:
		// Never applied, by any copy: what the agent wrote stays.
		if d, err := decode[lt.WorkspaceChangeNotAppliedData](ev); err == nil {
			// A copy: a caller may hold a slice of the list (ChangesToApply).
			s.PersonChanges = slices.DeleteFunc(slices.Clone(s.PersonChanges), func(c PersonChange) bool { return c.Seq == d.ChangeSeq })
		}
	}
}

// modelCallOpened notes a call requested (see State.NextModelAttempt).
func modelCallOpened(s *State, req ModelRequest) {
	modelCallEnded(s, req.Purpose)
	s.OpenModelCalls = append(s.OpenModelCalls, req)
}

// modelCallEnded forgets the open call of purpose: its outcome is journaled.
func modelCallEnded(s *State, purpose string) {
	var open []ModelRequest // a new slice: a copy of the state may share the old one
	for _, r := range s.OpenModelCalls {
		if r.Purpose != purpose {
			open = append(open, r)
		}
	}
	s.OpenModelCalls = open
}

// applyMonitorReviewed records the model monitor's review: its call's
// usage (counted in the session's, and apart as MonitorCostUSD), and the
// step or call it reviewed, so that no restart reviews it again.
func applyMonitorReviewed(s *State, ev *event, ch *Changes) error {
	d, err := decode[lt.MonitorReviewedData](ev)
	if err != nil {
		return err
	}
	s.ModelAttempt = 0
	modelCallEnded(s, lt.PurposeMonitor)
	if d.ModelCalled() {
		s.MonitorPosition++
		u := d.Usage
		u.CostUSD, u.MonitorCostUSD, u.ModelCalls, u.ToolCalls = d.CostUSD, d.CostUSD, 1, 0
		s.Session.Usage.Add(u)
		if t := s.CurrentTurn(); t != nil {
			t.Usage.Add(u)
			putTurnFigures(ch, *t)
		}
	}
	if s.Step == nil || s.Step.N != d.Step {
		return nil
	}
	switch d.Trigger {
	case lt.ReviewEverySteps:
		s.Step.Reviewed = true
	case lt.ReviewBefore:
		for i := range s.Step.Calls {
			if c := &s.Step.Calls[i]; c.ID == d.CallID {
				c.Review = d.Verdict
			}
		}
	}
	return nil
}
