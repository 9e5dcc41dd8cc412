package journal

import (
	"encoding/json"
	"slices"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// State is the projection of one session's journal: everything the turn loop
// and the API need without reading the journal again. It is persisted (as
// JSON) beside the session row in the transaction of every append.
type State struct {
	// Session is the API view, except RequiredActions (see Pending).
	Session lt.Session `json:"session"`
	// Turns are the unfinished turns in order; Turns[0] is the current one.
	Turns []lt.Turn `json:"turns,omitempty"`
	// TurnCount is how many turns were ever created.
	TurnCount int `json:"turn_count"`
	// ModelPosition counts completed model calls (responded, or failed in a
	// way that consumed a position): it is the scripted provider's position.
	ModelPosition int `json:"model_position"`
	// MonitorPosition counts the model monitor's completed calls (its
	// reviews, and its failed calls that consumed a position): its own
	// script's position, apart from the agent's.
	MonitorPosition int `json:"monitor_position,omitempty"`
	// HeldFor is the monitor action whose hold was carried down to the
	// session's sub-agents (monitor.held): until it is, a session waiting
	// on a monitor action stays runnable, so a worker carries it down.
	HeldFor string `json:"held_for,omitempty"`
	// ModelAttempt counts failed attempts of the current model call (and
	// the attempts before a failed one that a crash cut).
	ModelAttempt int `json:"model_attempt,omitempty"`
	// OpenModelCalls are the model calls requested with no outcome
	// journaled (model.responded, model.failed, context.compacted,
	// acceptance.verified), at most one per purpose: a crash cut them, and
	// the call made again numbers its attempt after them
	// (NextModelAttempt).
	OpenModelCalls []ModelRequest `json:"open_model_calls,omitempty"`
	// Step is the current turn's latest step, nil before its first response.
	Step *Step `json:"step,omitempty"`
	// Pending holds the pending required actions.
	Pending []lt.Action `json:"pending,omitempty"`
	// OpenEffects holds ledger rows whose outcome is not final yet (started,
	// in doubt): after a crash these are what may have touched the world.
	OpenEffects []lt.Effect `json:"open_effects,omitempty"`
	// Cancel is set while a cancel request waits for the next safe point.
	Cancel *lt.SessionCancelRequestedData `json:"cancel,omitempty"`
	// Steer counts the steering messages and how far model calls carry
	// them (steer.go).
	Steer Steer `json:"steer,omitzero"`
	// ArtifactVersions is the latest version of each artifact name.
	ArtifactVersions map[string]int `json:"artifact_versions,omitempty"`
	// ToolErrorStreak counts the current turn's tool calls that failed in a
	// row (a stop condition).
	ToolErrorStreak int `json:"tool_error_streak,omitempty"`
	// LastCallKey and LastCallRepeat detect loops: the tool and arguments
	// hash of the turn's latest call, and how many times in a row it came.
	LastCallKey    string `json:"last_call_key,omitempty"`
	LastCallRepeat int    `json:"last_call_repeat,omitempty"`
	// BudgetWarned holds, per budget dimension, the hard limit that a
	// budget.warning was already given for.
	BudgetWarned map[string]float64 `json:"budget_warned,omitempty"`
	// ForceCompact is set when the provider said the context is too long:
	// the next call compacts first. ContextRetryStep is the step that retry
	// was granted to: a second refusal of the same step ends the turn.
	ForceCompact     bool `json:"force_compact,omitempty"`
	ContextRetryStep int  `json:"context_retry_step,omitempty"`
	// Verification is the current turn's acceptance checking.
	Verification *Verification `json:"verification,omitempty"`
	// CheckpointStep is the step of the current turn that the latest
	// automatic checkpoint was taken after.
	CheckpointStep int `json:"checkpoint_step,omitempty"`
	// LastSnapshot is the workspace snapshot of the latest checkpoint that
	// has one (LastSnapshotCheckpoint): what a lost workspace is restored
	// from.
	LastSnapshot           string `json:"last_snapshot,omitempty"`
	LastSnapshotCheckpoint string `json:"last_snapshot_checkpoint,omitempty"`
	// PersonChanges are the workspace.changed of people since the latest
	// snapshot: a node restoring the workspace applies them, in order, on
	// top of LastSnapshot (a checkpoint's snapshot then holds them).
	PersonChanges []PersonChange `json:"person_changes,omitempty"`
	// WorkspaceNode is the node that last changed the workspace (a tool
	// that is not read-only, a restore, a person's change): another node's
	// copy is stale.
	WorkspaceNode string `json:"workspace_node,omitempty"`
	// EnvironmentRunner is the runner the session's environment lives on
	// (the last environment.opened): its next opens go back to it.
	EnvironmentRunner string `json:"environment_runner,omitempty"`
	// EnvironmentRunnerKey is the key id that runner connected with ("":
	// a journal from before keys were recorded, any key of the name).
	EnvironmentRunnerKey string `json:"environment_runner_key,omitempty"`
	// IdleStopSeconds is the agent's environment.idle_stop_seconds (0 for
	// a sub-agent, which shares its root's workspace): see IdleStopAt.
	IdleStopSeconds int `json:"idle_stop_seconds,omitempty"`
	// EnvironmentStopped is set from environment.stopped until the
	// environment is restored (environment.restored): no copy of the
	// workspace lives anywhere, the next call recreates it.
	EnvironmentStopped bool `json:"environment_stopped,omitempty"`
	// EnvironmentSnapshot is the snapshot the environment was stopped at
	// (environment.stopped), or was about to be (environment.stopping:
	// the stop's outcome may never have come back), until the next
	// checkpoint's snapshot: a copy recreated, or made anew after it was
	// lost, is restored from it rather than from LastSnapshot
	// (WorkspaceSnapshot). Empty when the stopped copy could not be
	// trusted: the recreated one is then restored as a lost one is.
	EnvironmentSnapshot string `json:"environment_snapshot,omitempty"`
	// EnvironmentSnapshotChanges is the seq of the last person's change
	// EnvironmentSnapshot holds (environment.stopping's
	// person_changes_through): a copy restored from it lacks only the
	// changes after it (ChangesToApply). 0 when it holds none.
	EnvironmentSnapshotChanges int64 `json:"environment_snapshot_changes,omitempty"`
	// EnvironmentSnapshotPassed is set when a tool that changes the
	// workspace started after EnvironmentSnapshot was taken: a copy
	// restored from it lacks what the tool did (the step's calls are run
	// again, or reported missing, as after any loss).
	EnvironmentSnapshotPassed bool `json:"environment_snapshot_passed,omitempty"`
	// IdleStopFailures counts the idle stops refused in a row
	// (environment.stop_failed) since the environment was last stopped,
	// opened on a runner or used: each doubles the wait before the next
	// try (IdleStopAt), so a runner away for days costs a few events.
	IdleStopFailures int `json:"idle_stop_failures,omitempty"`
	// UnrestoredLosses counts the environment.lost events since the last
	// environment.restored (or the turn's start): restores of the
	// workspace begun that did not bring it back. An environment that
	// answers a restore but does not hold the snapshot after it (a
	// hostile or broken runner) would have the session restore at every
	// call; the engine stops trying past a bound.
	UnrestoredLosses int `json:"unrestored_losses,omitempty"`
	// TurnLossSteps are the steps of the current turn at which its
	// workspace was lost (environment.lost), oldest first, the last
	// MaxTurnLossSteps of them. UnrestoredLosses resets at every restore:
	// a runner that holds the snapshot right after each restore but loses
	// the workspace at the next call would have the session lose and
	// restore for ever, each restore shipping the whole snapshot. These
	// let the engine bound the losses within a window of steps, across
	// claims and reconnections, while a loss now and then is restored.
	// Only losses where the workspace lived count (lostWhereItLived): a
	// session that moves to another node finds no copy there, or a stale
	// one, and that move is not its environment failing it.
	TurnLossSteps []int `json:"turn_loss_steps,omitempty"`
	// Wait is the call the current turn waits on (sleep, wait_for_signal).
	Wait *Wait `json:"wait,omitempty"`
	// TurnDeadline is when the current turn's timeout ends it, if it has
	// one (lt.TurnStartedData.Deadline).
	TurnDeadline *time.Time `json:"turn_deadline,omitempty"`
	// Signals are signals that arrived with no wait for them: the next
	// wait_for_signal of that name takes the oldest.
	Signals []lt.SignalReceivedData `json:"signals,omitempty"`
	// ArtifactIDs is the id of the latest version of each artifact name.
	ArtifactIDs map[string]string `json:"artifact_ids,omitempty"`
	// Workspace is the session whose workspace this one works in ("": its
	// own); Depth its depth in a tree of sub-agents (0: a root).
	Workspace string `json:"workspace,omitempty"`
	Depth     int    `json:"depth,omitempty"`
	// Children are the sub-agents this session spawned.
	Children []Child `json:"children,omitempty"`
	// ReportDue is set on a sub-agent whose last turn ended and whose
	// parent was not told yet (subagent.reported clears it): the session
	// stays runnable until the parent has it.
	ReportDue *lt.SubagentCompletedData `json:"report_due,omitempty"`
	// BrowserSites are the sites (origins) a person allowed the browser
	// tool for the rest of the session (browser_permission, scope
	// session), rebuilt from the journal like everything here.
	BrowserSites []string `json:"browser_sites,omitempty"`
	// Tally is how the work went (asks, retries, how far it got), for
	// reports: see tally.go.
	Tally Tally `json:"tally,omitzero"`

	// ContextSnapshot is the latest context.compacted that names a
	// snapshot of the context (resume.go in the engine): a resumed worker
	// rebuilds from it and the events after it, not from the whole
	// journal.
	ContextSnapshot *ContextSnapshot `json:"context_snapshot,omitempty"`

	// Pause is set from a pause request until the session is resumed (or
	// its turns end): see pause.go. PausedFor is how long the session's
	// ended pauses lasted: its wall-clock budget does not count them.
	Pause     *Pause        `json:"pause,omitempty"`
	PausedFor time.Duration `json:"paused_for,omitempty"`
}

// Child is a sub-agent spawned by the session.
type Child struct {
	ID string `json:"id"`
	// TurnID, Step, Index, CallID: the spawn_agent call that created it.
	TurnID string `json:"turn_id,omitempty"`
	Step   int    `json:"step,omitempty"`
	Index  int    `json:"index,omitempty"`
	CallID string `json:"call_id,omitempty"`
	// Budget is the share of the session's budget the child got: it is
	// reserved (counted as used) until the child completes.
	Budget lt.Budget `json:"budget"`
	Done   bool      `json:"done,omitempty"`
	// CancelRequested: the child was asked to stop.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Usage is the child's usage rolled up into the session so far.
	Usage lt.Usage `json:"usage"`
	// ReportedTurn is the child's last turn whose end was applied.
	ReportedTurn string `json:"reported_turn,omitempty"`
	// Result is the child's last report (dropped once the turn that
	// spawned it is over).
	Result *lt.SubagentCompletedData `json:"result,omitempty"`
}

// WorkspaceID is the session whose workspace this one uses.
func (s *State) WorkspaceID() string {
	if s.Workspace != "" {
		return s.Workspace
	}
	return s.Session.ID
}

// Child returns the sub-agent with that id.
func (s *State) Child(id string) *Child {
	for i := range s.Children {
		if s.Children[i].ID == id {
			return &s.Children[i]
		}
	}
	return nil
}

// RunningChildren counts the sub-agents that have not completed and were
// not asked to stop.
func (s *State) RunningChildren() int {
	n := 0
	for _, c := range s.Children {
		if !c.Done && !c.CancelRequested {
			n++
		}
	}
	return n
}

// OrphanedChildren lists the running sub-agents whose spawning turn is
// over: they must be asked to stop.
func (s *State) OrphanedChildren() []string {
	var out []string
	for _, c := range s.Children {
		if c.Done || c.CancelRequested {
			continue
		}
		live := false
		for _, t := range s.Turns {
			if t.ID == c.TurnID {
				live = true
				break
			}
		}
		if !live {
			out = append(out, c.ID)
		}
	}
	return out
}

// Reserved is the budget held by running sub-agents: their shares count as
// spent until they complete and their real usage rolls up. The token share
// is in InputTokens.
func (s *State) Reserved() lt.Usage {
	var u lt.Usage
	for _, c := range s.Children {
		if c.Done {
			continue
		}
		u.CostUSD += c.Budget.MaxCostUSD
		u.InputTokens += c.Budget.MaxTokens
		u.ModelCalls += c.Budget.MaxModelCalls
		u.ToolCalls += c.Budget.MaxToolCalls
	}
	return u
}

// ReservedSoft is what running children may still spend before one of
// them asks a person: per limit, each child's soft threshold where it has
// one, else its hard share (Reserved). A parent's soft thresholds count it,
// as its hard limits count Reserved.
func (s *State) ReservedSoft() lt.Usage {
	var u lt.Usage
	either := func(soft, max float64) float64 {
		if soft > 0 {
			return soft
		}
		return max
	}
	for _, c := range s.Children {
		if c.Done {
			continue
		}
		b := c.Budget
		u.CostUSD += either(b.SoftCostUSD, b.MaxCostUSD)
		u.InputTokens += int64(either(float64(b.SoftTokens), float64(b.MaxTokens)))
		u.ModelCalls += int64(either(float64(b.SoftModelCalls), float64(b.MaxModelCalls)))
		u.ToolCalls += int64(either(float64(b.SoftToolCalls), float64(b.MaxToolCalls)))
	}
	return u
}

// ContextSnapshot locates a snapshot of what a worker derives from the
// journal up to event Seq.
type ContextSnapshot struct {
	Seq    int64  `json:"seq"`
	SHA256 string `json:"sha256"`
}

// Verification tracks the acceptance checks of the current turn.
type Verification struct {
	// Step is the step whose final answer was last checked.
	Step    int                   `json:"step"`
	Verdict *lt.AcceptanceVerdict `json:"verdict"`
}

// Wait is a durable wait of the current turn.
type Wait struct {
	lt.WaitStartedData
	// Signal is the signal that ended it, once one came.
	Signal *lt.SignalReceivedData `json:"signal,omitempty"`
	// Satisfied: the sub-agents waited for completed (agents), or a
	// slot is free (subagent_slot).
	Satisfied bool `json:"satisfied,omitempty"`
}

// Ready reports whether the wait is over at now: its signal came, its
// sub-agents completed, or its time passed.
func (w *Wait) Ready(now time.Time) bool {
	return w.Signal != nil || w.Satisfied || (w.Until != nil && !now.Before(*w.Until))
}

// woken reports whether something other than time ended the wait.
func (w *Wait) woken() bool { return w.Signal != nil || w.Satisfied }

// CallStatus is the progress of one tool call within a step.
type CallStatus string

// Call statuses.
const (
	CallRequested      CallStatus = "requested"
	CallStarted        CallStatus = "started"
	CallAwaitingAction CallStatus = "awaiting_action"
	CallDone           CallStatus = "done"
)

// MaxTurnLossSteps is how many of a turn's losses of its workspace the
// state keeps the steps of (State.TurnLossSteps): more than any bound the
// engine sets on them within a window.
const MaxTurnLossSteps = 16

// Step is one model response and the tool calls it asked for.
type Step struct {
	N      int    `json:"n"`
	TurnID string `json:"turn_id"`
	Text   string `json:"text,omitempty"`
	Calls  []Call `json:"calls,omitempty"`
	// Reviewed: the model monitor's periodic review of this step is
	// journaled (monitor.reviewed, trigger every_steps).
	Reviewed bool `json:"reviewed,omitempty"`
}

// Done reports whether every call of the step is done.
func (s *Step) Done() bool {
	for _, c := range s.Calls {
		if c.Status != CallDone {
			return false
		}
	}
	return true
}

// Call is one tool call of a step.
type Call struct {
	Index int    `json:"index"`
	ID    string `json:"id"`
	Tool  string `json:"tool"`
	// Server is the MCP server of a call of kind mcp, as tool.requested
	// named it (empty in a state written before it did).
	Server          string          `json:"server,omitempty"`
	Kind            string          `json:"kind"`
	Class           lt.EffectClass  `json:"effect"`
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsSHA256 string          `json:"arguments_sha256"`
	// ArgumentsSeq is the event that set Arguments: tool.requested, or the
	// action.resolved of an approval that edited them (the ledger points
	// at it).
	ArgumentsSeq   int64      `json:"arguments_seq,omitempty"`
	Status         CallStatus `json:"status"`
	EffectID       string     `json:"effect_id,omitempty"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	ActionID       string     `json:"action_id,omitempty"`
	Attempts       int        `json:"attempts,omitempty"`
	Failed         bool       `json:"failed,omitempty"`
	// Policy is the decision of the policy that matched the call, once
	// evaluated ("" when none matched or not evaluated yet).
	Policy lt.PolicyDecision `json:"policy,omitempty"`
	// ApprovedSHA256 is the arguments hash a person approved: the call may
	// run only with arguments that hash to it.
	ApprovedSHA256 string `json:"approved_sha256,omitempty"`
	// Repeat is how many times in a row (this one included) the turn asked
	// for this tool with these arguments.
	Repeat int `json:"repeat,omitempty"`
	// LostServer and LostError say, for a started call of an MCP server
	// that went away mid-call (mcp.server_lost), which server and how: the
	// call's outcome is unknown because of the server, not of the worker.
	LostServer string `json:"lost_server,omitempty"`
	LostError  string `json:"lost_error,omitempty"`
	// BrowserOnce are the sites a person allowed for this browser call
	// only (browser_permission, scope once): its navigations, however
	// many times it runs again; no other call's.
	BrowserOnce []string `json:"browser_once,omitempty"`
	// Review is the verdict of the model monitor's review before this
	// call (monitor.reviewed, trigger before), once journaled: the call
	// is never reviewed again, whatever restarts come between.
	Review string `json:"review,omitempty"`
}

// ModelRequest is a model call's request, as model.requested gave it.
type ModelRequest struct {
	Purpose string `json:"purpose,omitempty"`
	Step    int    `json:"step"`
	Attempt int    `json:"attempt"`
}

// NextModelAttempt is the attempt number of the next model call of the
// given step and purpose: one more than the failed attempts, and past an
// attempt of the same call that a crash cut (it may have left model.delta
// events without an outcome: the call made again must not share their
// attempt number, or readers that group deltas by attempt would merge the
// two calls' text). A call made again for a reason that is no failure (a
// steering message, a compaction) starts at 1, as before.
func (s *State) NextModelAttempt(step int, purpose string) int {
	next := s.ModelAttempt + 1
	for _, r := range s.OpenModelCalls {
		if r.Purpose == purpose && r.Step == step {
			next = max(next, r.Attempt+1)
		}
	}
	return next
}

// CurrentTurn returns the current (first unfinished) turn, or nil.
func (s *State) CurrentTurn() *lt.Turn {
	if len(s.Turns) == 0 {
		return nil
	}
	return &s.Turns[0]
}

// Runnable reports whether a worker has something to do: a cancel or a
// pause to carry out, or an unfinished turn of a session that is not paused
// with no pending required action.
func (s *State) Runnable() bool {
	if len(s.OrphanedChildren()) > 0 {
		return true // sub-agents to stop
	}
	if len(s.Turns) == 0 {
		return s.ReportDue != nil // a parent to tell
	}
	if s.Cancel != nil && !s.CancelHeld() {
		return true
	}
	if s.Pause != nil {
		// A requested pause is carried out by a worker; a paused session
		// holds none, whatever was decided or signalled meanwhile.
		return s.PauseRequested()
	}
	if s.HoldDue() {
		return true // the sub-agents to hold
	}
	// A wait is claimed again by its wake time (WakeAt), or by what ends
	// it (a signal, sub-agents).
	return len(s.Pending) == 0 && (s.Wait == nil || s.Wait.woken())
}

// HoldDue reports whether a monitor action waits whose hold was not
// carried down to the session's sub-agents yet (engine/monitorhold.go).
func (s *State) HoldDue() bool {
	for _, a := range s.Pending {
		if a.Type == lt.ActionMonitor {
			return s.HeldFor != a.ID
		}
	}
	return false
}

// CancelHeld reports whether a requested cancel must wait before it ends
// the turns: an irreversible call whose outcome is unknown (started when
// its worker stopped, or in doubt) is settled first, by its reconcile probe
// or a person's decision, so a cancel never forgets an effect.
func (s *State) CancelHeld() bool {
	for _, a := range s.Pending {
		if a.Type == lt.ActionInDoubt {
			return true
		}
	}
	if s.Step != nil {
		for _, c := range s.Step.Calls {
			if c.Status == CallStarted && c.Class == lt.EffectIrreversible {
				return true
			}
		}
	}
	return false
}

// WakeAt is when a waiting session must be looked at again without anyone
// acting on it: the earliest expiry of a pending action (nil: never).
func (s *State) WakeAt() *time.Time {
	if s.Paused() {
		return nil // nothing fires while paused; a due timer fires on resume
	}
	var at *time.Time
	for i := range s.Pending {
		if e := s.Pending[i].ExpiresAt; e != nil && (at == nil || e.Before(*at)) {
			t := *e
			at = &t
		}
	}
	if w := s.Wait; w != nil && !w.woken() {
		// The wait ends at its own time, or earlier when the turn's
		// timeout or the session's wall-clock budget cuts it: the
		// session is claimed then and stops.
		for _, e := range []*time.Time{w.Until, s.TurnDeadline, s.WallDeadline()} {
			if e != nil && (at == nil || e.Before(*at)) {
				t := *e
				at = &t
			}
		}
	}
	return at
}

// WorkspaceSnapshot is the snapshot the session's workspace is at, as far
// as the journal knows: the one its environment was stopped at since the
// last checkpoint, else the last checkpoint's.
func (s *State) WorkspaceSnapshot() string {
	if s.EnvironmentSnapshot != "" {
		return s.EnvironmentSnapshot
	}
	return s.LastSnapshot
}

// ChangesToApply are the people's changes a copy of the workspace restored
// from WorkspaceSnapshot lacks, in order: those after the last one that
// snapshot holds. A checkpoint's snapshot holds none of PersonChanges (they
// are cleared by it); a stop's snapshot holds those applied to the
// workspace before it was taken. Applying one it holds again would undo
// what the model did to that file since.
// ChangePending reports whether the person's change journaled at seq is
// still to be applied: not journaled as applied in a snapshot, nor ended
// (workspace.change_not_applied).
func (s *State) ChangePending(seq int64) bool {
	for _, c := range s.PersonChanges {
		if c.Seq == seq {
			return true
		}
	}
	return false
}

func (s *State) ChangesToApply() []PersonChange {
	if s.EnvironmentSnapshot == "" || s.EnvironmentSnapshotChanges == 0 {
		return s.PersonChanges
	}
	for i, c := range s.PersonChanges {
		if c.Seq > s.EnvironmentSnapshotChanges {
			return s.PersonChanges[i:]
		}
	}
	return nil
}

// maxIdleStopBackoff bounds the wait between two tries of a refused idle
// stop.
const maxIdleStopBackoff = 7 * 24 * time.Hour

// IdleStopAt is when the environment of a parked session is to be stopped
// (environment.idle_stop_seconds after its last event; after refused
// tries, twice as long for each), or nil: no idle stop set, a sub-agent (it
// shares its root's workspace), a root whose sub-agents still work in it,
// no environment known to hold anything (no tool changed the workspace, no
// checkpoint, never opened on a runner), an environment already stopped, a
// session that is runnable, running or waiting for a runner. A session a
// person paused is parked like one that waits: its environment is stopped
// too, and recreated by the first step after the resume.
func (s *State) IdleStopAt() *time.Time {
	if s.IdleStopSeconds <= 0 || s.Workspace != "" || s.EnvironmentStopped || s.Runnable() {
		return nil
	}
	if s.WorkspaceNode == "" && s.LastSnapshot == "" && s.EnvironmentRunner == "" {
		return nil
	}
	switch s.Session.Status {
	case lt.SessionWaiting, lt.SessionRequiresAction, lt.SessionIdle, lt.SessionFailed, lt.SessionCancelled, lt.SessionPaused:
	default:
		return nil
	}
	for _, c := range s.Children {
		if !c.Done {
			return nil
		}
	}
	for _, a := range s.Pending {
		if a.Type == lt.ActionEnvironmentConnection {
			return nil // no environment to stop: it waits for one
		}
	}
	wait := time.Duration(s.IdleStopSeconds) * time.Second
	for range min(s.IdleStopFailures, 20) {
		wait *= 2
		if wait >= maxIdleStopBackoff {
			wait = maxIdleStopBackoff
			break
		}
	}
	wait = max(wait, time.Duration(s.IdleStopSeconds)*time.Second)
	t := s.Session.UpdatedAt.Add(wait)
	return &t
}

// WallDeadline is when the session's wall-clock budget (max_wall_seconds,
// counted from its creation, less the time it was paused) runs out; nil
// when it has none.
func (s *State) WallDeadline() *time.Time {
	if s.Session.Budget.MaxWallSeconds <= 0 {
		return nil
	}
	t := s.Session.CreatedAt.Add(time.Duration(s.Session.Budget.MaxWallSeconds)*time.Second + s.PausedFor)
	return &t
}

// PendingAction returns the pending action with that id.
func (s *State) PendingAction(id string) (*lt.Action, int) {
	for i := range s.Pending {
		if s.Pending[i].ID == id {
			return &s.Pending[i], i
		}
	}
	return nil, -1
}

// OpenEffect returns the open effect with that id.
func (s *State) OpenEffect(id string) (*lt.Effect, int) {
	for i := range s.OpenEffects {
		if s.OpenEffects[i].ID == id {
			return &s.OpenEffects[i], i
		}
	}
	return nil, -1
}

// Call returns the current step's call at index, if the step is step n.
func (s *State) Call(step, index int) *Call {
	if s.Step == nil || s.Step.N != step || index < 0 || index >= len(s.Step.Calls) {
		return nil
	}
	c := &s.Step.Calls[index]
	if c.Index != index {
		return nil
	}
	return c
}

// CallByID returns the current step's call with that id, if the step is step n.
func (s *State) CallByID(step int, callID string) *Call {
	if s.Step == nil || s.Step.N != step {
		return nil
	}
	for i := range s.Step.Calls {
		if s.Step.Calls[i].ID == callID {
			return &s.Step.Calls[i]
		}
	}
	return nil
}

// View returns the API's session object: the projection plus the pending
// required actions.
func (s *State) View() lt.Session {
	v := s.Session
	v.RequiredActions = append([]lt.Action{}, s.Pending...)
	v.CancelRequested = s.Cancel != nil
	v.PauseRequested = s.PauseRequested()
	v.PausedSeconds = s.PausedFor.Seconds()
	if p := s.Pause; p != nil {
		v.PauseReason, v.PausedAt, v.PauseParentID = p.Reason, p.At, p.Parent
	}
	if v.Constraints == nil {
		v.Constraints = []string{}
	}
	if v.AcceptanceCriteria == nil {
		v.AcceptanceCriteria = []string{}
	}
	if len(v.Metadata) == 0 || string(v.Metadata) == "null" {
		v.Metadata = json.RawMessage("{}")
	}
	v.Project = s.Project()
	return v
}

// Project is the project of the session: the one its session.created
// names, or lt.DefaultProject for a session journaled before projects
// existed (the migration put those in the default project).
func (s *State) Project() string {
	if s.Session.Project == "" {
		return lt.DefaultProject
	}
	return s.Session.Project
}

// DocKind names a projection row kind (mirrors the store's tables).
type DocKind string

// Projection row kinds.
const (
	DocTurn       DocKind = "turn"
	DocAction     DocKind = "action"
	DocEffect     DocKind = "effect"
	DocArtifact   DocKind = "artifact"
	DocCheckpoint DocKind = "checkpoint"
)

// Doc is one projection row changed by applying events.
type Doc struct {
	Kind      DocKind
	ID        string
	Status    string
	Value     any
	CreatedAt time.Time
}

// Changes collects the projection rows touched by a batch of events; a row
// touched twice keeps its last value. A batch touches a few rows (a step:
// its turn, an effect, a checkpoint), so they are kept in a slice searched
// from the end, without a map or a key string made at every touch (every
// event of a step touches its turn); an index by key is built only for a
// batch that touches many (an import, a fork).
type Changes struct {
	docs  []Doc
	index map[docKey]int
}

type docKey struct {
	kind DocKind
	id   string
}

// changesIndexAt is the number of rows from which put finds a row by its
// index rather than by a scan.
const changesIndexAt = 16

func (c *Changes) put(d Doc) {
	if c == nil {
		return
	}
	if i := c.find(d.Kind, d.ID); i >= 0 {
		c.docs[i] = d
		return
	}
	if c.index != nil {
		c.index[docKey{d.Kind, d.ID}] = len(c.docs)
	}
	c.docs = append(c.docs, d)
	if c.index == nil && len(c.docs) >= changesIndexAt {
		c.index = make(map[docKey]int, 2*len(c.docs))
		for i, x := range c.docs {
			c.index[docKey{x.Kind, x.ID}] = i
		}
	}
}

// find returns the position of the row of kind and id, or -1.
func (c *Changes) find(kind DocKind, id string) int {
	if c.index != nil {
		if i, ok := c.index[docKey{kind, id}]; ok {
			return i
		}
		return -1
	}
	for i := len(c.docs) - 1; i >= 0; i-- {
		if c.docs[i].Kind == kind && c.docs[i].ID == id {
			return i
		}
	}
	return -1
}

// doc returns the row of kind and id the batch touched, if any.
func (c *Changes) doc(kind DocKind, id string) (Doc, bool) {
	if i := c.find(kind, id); i >= 0 {
		return c.docs[i], true
	}
	return Doc{}, false
}

// Docs returns the changed rows in first-touched order.
func (c *Changes) Docs() []Doc {
	return slices.Clone(c.docs)
}

// PersonChange is a person's change the latest snapshot does not hold yet
// (State.PersonChanges): Seq is its workspace.changed event.
type PersonChange struct {
	Seq    int64  `json:"seq"`
	Op     string `json:"op"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
	// Size is a write's (its content's length).
	Size int64 `json:"size,omitempty"`
	// BasedOn is the change's based_on: checked against a snapshot view,
	// it is applied only where the live file still holds that.
	BasedOn string `json:"based_on,omitempty"`
}

// lostWhereItLived reports whether a loss of the workspace found by node
// is one of the environment that held it: its runner's (wherever the node
// that reached it), or, on the nodes' own disks, the node that last
// changed or restored it (WorkspaceNode; none yet counts as that node).
// A node the session moved to finds the workspace missing or stale there:
// a restore brings it over, and that is no failure of an environment, so
// sessions that move between nodes at every step (leases lost, nodes
// killed) are never failed for it by the bound on losses.
func (s *State) lostWhereItLived(node string) bool {
	return s.EnvironmentRunner != "" || s.WorkspaceNode == "" || node == s.WorkspaceNode
}
