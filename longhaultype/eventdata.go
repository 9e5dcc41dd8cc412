package longhaultype

import (
	"encoding/json"
	"time"
)

// The payloads of the journal's events, one Go type per event type: an
// Event's Data is the JSON of the type EventData names for its Type
// (eventregistry.go). They are the wire contract of the journal itself: the
// engine writes these structs, the projection of a session's state reads
// them, and the API, the SSE streams and the Go client hand the same JSON
// on. A field only the engine acts on is still part of that contract, so it
// is here too, marked "engine bookkeeping": a client may ignore it.
//
// Naming: the payload of EventX is XData (EventSessionCreated:
// SessionCreatedData), because the plain names clash with the package's
// resources and statuses (TurnCompleted is a TurnStatus). One exception:
// workspace.changed carries a WorkspaceChange (files.go), which is also the
// answer of a file upload. Parts of a payload (ToolCall, MCPTool,
// MCPHiddenTool) have no suffix.

// Sessions.

// SessionCreatedData is the data of session.created.
type SessionCreatedData struct {
	Agent              AgentRef        `json:"agent"`
	Input              string          `json:"input"`
	Goal               string          `json:"goal,omitempty"`
	Constraints        []string        `json:"constraints,omitempty"`
	AcceptanceCriteria []string        `json:"acceptance_criteria,omitempty"`
	Budget             Budget          `json:"budget"`
	Metadata           json.RawMessage `json:"metadata,omitempty"`
	WebhookURL         string          `json:"webhook_url,omitempty"`
	ParentID           string          `json:"parent_id,omitempty"`
	// Workspace is the session whose workspace this one works in (a
	// sub-agent shares its root's); empty: its own. Engine bookkeeping.
	Workspace string `json:"workspace,omitempty"`
	// Depth is 0 for a session created through the API, its parent's + 1
	// for a sub-agent. Engine bookkeeping (the API shows the tree through
	// parent_id).
	Depth int `json:"depth,omitempty"`
	// Project is the project the session belongs to (a sub-agent is in its
	// parent's); empty in journals written before projects existed, whose
	// sessions are in DefaultProject.
	Project string `json:"project,omitempty"`
	// Actor is who created the session; a sub-agent's is its root's
	// creator, so that a policy's not_creator holds across the tree. Nil
	// in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
	// IdleStopSeconds is the agent's environment.idle_stop_seconds, for a
	// session with a workspace of its own (a sub-agent shares its root's
	// and is never stopped). Engine bookkeeping: the session's wake time
	// is derived from it.
	IdleStopSeconds int `json:"idle_stop_seconds,omitempty"`
}

// SessionStatusChangedData is the data of session.status_changed.
type SessionStatusChangedData struct {
	From       SessionStatus `json:"from"`
	To         SessionStatus `json:"to"`
	StopReason string        `json:"stop_reason,omitempty"`
}

// SessionCancelRequestedData is the data of session.cancel_requested.
type SessionCancelRequestedData struct {
	Reason string `json:"reason,omitempty"`
	// Actor is who asked to cancel; nil when the engine did it by itself, or
	// in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
	// Request is the seed of the request with an Idempotency-Key that
	// journaled it, by which a run of the same request after its server
	// died finds it instead of journaling it again; empty without a key.
	Request string `json:"request,omitempty"`
}

// SessionPauseRequestedData is the data of session.pause_requested.
type SessionPauseRequestedData struct {
	Reason string `json:"reason,omitempty"`
	// Actor is who asked to pause; nil when the engine did it by itself, or
	// in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
	// Parent is set on a sub-agent paused because its parent was: the
	// parent's id. The parent's resume resumes it; it cannot be resumed
	// alone while that parent is paused.
	Parent string `json:"parent,omitempty"`
	// Request is the seed of the request with an Idempotency-Key that
	// journaled it, by which a run of the same request after its server
	// died finds it instead of journaling it again; empty without a key.
	Request string `json:"request,omitempty"`
}

// SessionPausedData is the data of session.paused.
type SessionPausedData struct {
	Reason string `json:"reason,omitempty"`
	// Actor is who asked for the pause (its session.pause_requested's
	// actor); nil when the engine did it by itself, or in a journal older
	// than actors.
	Actor *Actor `json:"actor,omitempty"`
	// Parent is the parent whose pause this one follows (see
	// SessionPauseRequestedData.Parent).
	Parent string `json:"parent,omitempty"`
	// Request is the seed of the request with an Idempotency-Key that
	// journaled it (a session no worker ran, paused at once), by which a run of the same request after its server
	// died finds it instead of journaling it again; empty without a key.
	Request string `json:"request,omitempty"`
}

// SessionResumedData is the data of session.resumed. PausedMS is how long
// the pause that it ends was in effect (0 when it had not taken effect: a
// request withdrawn); it is informational, the projection measures the
// events' times.
type SessionResumedData struct {
	PausedMS int64 `json:"paused_ms,omitempty"`
	// Actor is who resumed the session; nil when the engine did it by
	// itself, or in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
	// Parent is set when the session was resumed with its parent, whose
	// pause this one followed: the parent's id.
	Parent string `json:"parent,omitempty"`
	// Request is the seed of the request with an Idempotency-Key that
	// journaled it, by which a run of the same request after its server
	// died finds it instead of journaling it again; empty without a key.
	Request string `json:"request,omitempty"`
}

// SessionForkedData is the data of session.forked: the events before it are a
// copy of another session's journal up to one of its checkpoints (ids
// renamed for this session); the effects they record are inherited, done.
type SessionForkedData struct {
	From ForkRef `json:"from"`
	// Actor is who forked the session: the fork's creator (its
	// Session.CreatedBy). Nil in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
}

// SessionReviewedData is the data of session.reviewed.
type SessionReviewedData struct {
	Review Review `json:"review"`
	// Actor is who reviewed; nil when the engine did it by itself, or in a
	// journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
	// Request is the seed of the request with an Idempotency-Key that
	// journaled it, by which a run of the same request after its server
	// died finds it instead of journaling it again; empty without a key.
	Request string `json:"request,omitempty"`
}

// ConstraintAddedData is the data of session.constraint_added: a person pinned
// a constraint mid-session.
type ConstraintAddedData struct {
	Constraint string `json:"constraint"`
	// Actor is who pinned the constraint; nil when the engine did it by
	// itself, or in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
	// Request is the seed of the request with an Idempotency-Key that
	// journaled it, by which a run of the same request after its server
	// died finds it instead of journaling it again; empty without a key.
	Request string `json:"request,omitempty"`
}

// Turns.

// TurnCreatedData is the data of turn.created.
type TurnCreatedData struct {
	TurnID string `json:"turn_id"`
	Index  int    `json:"index"`
	Input  string `json:"input"`
}

// TurnStartedData is the data of turn.started.
type TurnStartedData struct {
	TurnID string `json:"turn_id"`
	// Deadline is when the turn's timeout (turn_timeout_seconds) ends it,
	// if it has one: a wake time of a session parked in a wait.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// TurnSteeredData is the data of turn.steered: a person's message to the turn
// TurnID (the current one when it was sent), given to the model verbatim as
// a user message at its next step call. Interrupt: a step's model call in
// flight is abandoned and made again with it.
type TurnSteeredData struct {
	TurnID    string `json:"turn_id"`
	Input     string `json:"input"`
	Interrupt bool   `json:"interrupt,omitempty"`
	// Actor is who sent the message; nil when the engine did it by itself,
	// or in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
	// Request is the seed of the request with an Idempotency-Key that
	// journaled it, by which a run of the same request after its server
	// died finds it instead of journaling it again; empty without a key.
	Request string `json:"request,omitempty"`
}

// TurnCompletedData is the data of turn.completed.
type TurnCompletedData struct {
	TurnID string `json:"turn_id"`
	Output string `json:"output"`
	// Acceptance is the last verdict on the answer, when the session has
	// acceptance criteria.
	Acceptance *AcceptanceVerdict `json:"acceptance,omitempty"`
}

// TurnFailedData is the data of turn.failed.
type TurnFailedData struct {
	TurnID     string `json:"turn_id"`
	StopReason string `json:"stop_reason"`
	Error      string `json:"error,omitempty"`
}

// TurnCancelledData is the data of turn.cancelled.
type TurnCancelledData struct {
	TurnID string `json:"turn_id"`
	Reason string `json:"reason,omitempty"`
}

// Model calls.

// Purposes of a model call other than a step of the loop.
const (
	PurposeCompaction   = "compaction"
	PurposeVerification = "verification"
)

// ModelRequestedData is the data of model.requested.
type ModelRequestedData struct {
	Step     int    `json:"step"`
	Position int    `json:"position"`
	Attempt  int    `json:"attempt"`
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	// Purpose is empty for a step's call, else compaction or verification.
	Purpose string `json:"purpose,omitempty"`
	// ContextTokens is the size of the context sent, as counted offline.
	ContextTokens int `json:"context_tokens,omitempty"`
	// Steers is how many of the session's steering messages (turn.steered,
	// in order) a step's context carries: the first Steers of them.
	Steers int `json:"steers,omitempty"`
}

// ModelDeltaData is the data of model.delta: streamed output of a call still
// running, coalesced (a crash may leave deltas of a call that never
// responded: only model.responded is the answer).
type ModelDeltaData struct {
	Step      int    `json:"step"`
	Attempt   int    `json:"attempt"`
	Purpose   string `json:"purpose,omitempty"`
	Text      string `json:"text,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
}

// ModelRespondedData is the data of model.responded.
type ModelRespondedData struct {
	Step       int        `json:"step"`
	Position   int        `json:"position"`
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	Usage      Usage      `json:"usage"`
	CostUSD    float64    `json:"cost_usd"`
	DurationMS int64      `json:"duration_ms"`
	Reasoning  *Reasoning `json:"reasoning,omitempty"`
	Model      string     `json:"model,omitempty"`
	StopReason string     `json:"stop_reason,omitempty"`
}

// ToolCall is a call the model asked for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ModelFailedData is the data of model.failed: a call that returned an error.
type ModelFailedData struct {
	Purpose      string `json:"purpose,omitempty"`
	Step         int    `json:"step"`
	Position     int    `json:"position"`
	Attempt      int    `json:"attempt"`
	Kind         string `json:"kind"`
	Status       int    `json:"status,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	Message      string `json:"message"`
	// Consumed: the provider consumed a position (a scripted error step); a
	// retry then plays the next position.
	Consumed   bool  `json:"consumed"`
	DurationMS int64 `json:"duration_ms"`
	// Retry says whether the call is tried again (transient, attempts
	// left), after RetryInMS (the backoff, or a longer Retry-After).
	Retry     bool  `json:"retry"`
	RetryInMS int64 `json:"retry_in_ms,omitempty"`
	// Interrupted names what cut the call in flight (Kind "timeout"):
	// max_wall_seconds, turn_timeout, cancelled, or steered (a steer with
	// interrupt: the call is made again with the message).
	Interrupted string `json:"interrupted,omitempty"`
	// Usage is what an abandoned call is counted for: the provider's own
	// report when it gave one, else its input counted offline (the request
	// was sent; a provider may bill it). Nil for other failures.
	Usage *Usage `json:"usage,omitempty"`
}

// InterruptedSteered is ModelFailedData.Interrupted for a call a steer with
// interrupt abandoned.
const InterruptedSteered = "steered"

// ContextCompactedData is the data of context.compacted: the conversation's
// first Items items (counted from the start of the session's transcript)
// are replaced, in what is sent to the model, by Summary. The journal keeps
// them all.
type ContextCompactedData struct {
	Step         int     `json:"step"`
	Items        int     `json:"items"`
	TokensBefore int     `json:"tokens_before"`
	TokensAfter  int     `json:"tokens_after"`
	Summary      string  `json:"summary"`
	Forced       bool    `json:"forced,omitempty"`
	Usage        Usage   `json:"usage"`
	CostUSD      float64 `json:"cost_usd"`
	DurationMS   int64   `json:"duration_ms"`
	// Snapshot is the blob holding what a worker derives from the journal
	// up to this event (the model context, with its summary and the items
	// kept): a worker resuming the session starts there rather than
	// replaying the journal before it. Absent when the worker could not
	// vouch for one; the journal alone still rebuilds everything.
	Snapshot *BlobRef `json:"snapshot,omitempty"`
}

// AcceptanceVerifiedData is the data of acceptance.verified: the verification
// call's verdict on the final answer of step Step.
type AcceptanceVerifiedData struct {
	Step       int               `json:"step"`
	Verdict    AcceptanceVerdict `json:"verdict"`
	Usage      Usage             `json:"usage"`
	CostUSD    float64           `json:"cost_usd"`
	DurationMS int64             `json:"duration_ms"`
}

// Tool calls and their effects.

// Call kinds: who executes a tool call.
const (
	CallBuiltin    = "builtin"    // run by the engine in the workspace
	CallFunction   = "function"   // answered by the application (function_call action)
	CallFinish     = "finish"     // ends the turn with artifacts
	CallHuman      = "human"      // ask_human: answered through an input action
	CallCheckpoint = "checkpoint" // the agent's named checkpoint
	CallWait       = "wait"       // sleep, wait_for_signal, wait_agents: a durable wait
	CallSpawn      = "spawn"      // spawn_agent: creates a sub-agent
	CallMCP        = "mcp"        // a tool of an MCP server: <server>__<tool>
	CallInvalid    = "invalid"    // unknown tool or bad arguments: fails at once
)

// ToolRequestedData is the data of tool.requested.
type ToolRequestedData struct {
	Step   int    `json:"step"`
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Server is the MCP server of a tool of kind mcp (Tool is then
	// "<server>__<tool>").
	Server          string          `json:"server,omitempty"`
	Kind            string          `json:"kind"`
	Class           EffectClass     `json:"effect"`
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsSHA256 string          `json:"arguments_sha256"`
}

// PolicyDecidedData is the data of policy.decided: a policy matched a call
// before it ran (a call that no policy matches is allowed without one).
type PolicyDecidedData struct {
	Step      int            `json:"step"`
	Index     int            `json:"index"`
	CallID    string         `json:"call_id"`
	Tool      string         `json:"tool"`
	Decision  PolicyDecision `json:"decision"`
	Rule      string         `json:"rule"`
	Reason    string         `json:"reason,omitempty"`
	EvalError string         `json:"eval_error,omitempty"`
}

// ToolStartedData is the data of tool.started: the effect is in the ledger
// before the tool runs.
type ToolStartedData struct {
	Step   int    `json:"step"`
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Server is the MCP server of a tool of kind mcp (Tool is then
	// "<server>__<tool>").
	Server         string      `json:"server,omitempty"`
	EffectID       string      `json:"effect_id"`
	IdempotencyKey string      `json:"idempotency_key"`
	Class          EffectClass `json:"effect"`
	Attempt        int         `json:"attempt"`
}

// ToolCompletedData is the data of tool.completed.
type ToolCompletedData struct {
	Step   int    `json:"step"`
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Server is the MCP server of a tool of kind mcp (Tool is then
	// "<server>__<tool>").
	Server     string          `json:"server,omitempty"`
	EffectID   string          `json:"effect_id,omitempty"`
	Output     json.RawMessage `json:"output"`
	DurationMS int64           `json:"duration_ms"`
	// Resolution says how an effect's outcome was known when not by running
	// it: "happened" (a person said so).
	Resolution string `json:"resolution,omitempty"`
}

// ToolFailedData is the data of tool.failed.
type ToolFailedData struct {
	Step   int    `json:"step"`
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Server is the MCP server of a tool of kind mcp (Tool is then
	// "<server>__<tool>").
	Server     string          `json:"server,omitempty"`
	EffectID   string          `json:"effect_id,omitempty"`
	Error      string          `json:"error"`
	Output     json.RawMessage `json:"output,omitempty"`
	DurationMS int64           `json:"duration_ms"`
	Resolution string          `json:"resolution,omitempty"`
	// Refused says why the call never ran, when it did not: a policy
	// denied it, a person rejected or stopped it, its approval expired or
	// did not match the arguments, or it repeated in a loop.
	Refused string `json:"refused,omitempty"`
	// Retry: the attempt failed transiently and the call runs again (same
	// effect and idempotency key) after RetryInMS (the backoff, or a longer
	// Retry-After the tool reported), as in model.failed.
	Retry     bool  `json:"retry,omitempty"`
	Attempt   int   `json:"attempt,omitempty"`
	RetryInMS int64 `json:"retry_in_ms,omitempty"`
	// Interrupted names the limit that cut the call in flight
	// (max_wall_seconds or turn_timeout); Output is then what it had
	// written so far.
	Interrupted string `json:"interrupted,omitempty"`
	// Code names, for a failure the engine itself made, what it was in a
	// form a program can match (ToolFailedCapabilityWidening); the Error
	// text is for the model and may change.
	Code string `json:"code,omitempty"`
}

// Codes of a failure the engine made (ToolFailedData.Code).
const (
	// ToolFailedCapabilityWidening: a spawn_agent call asked for a child
	// that may do more than its parent (a tool, host, secret or limit the
	// parent does not hold) and was refused.
	ToolFailedCapabilityWidening = "capability_widening"
)

// Reasons a call was refused (ToolFailedData.Refused).
const (
	RefusedPolicy           = "policy_denied"
	RefusedRejected         = "rejected"
	RefusedStopped          = "stopped"
	RefusedApprovalExpired  = "approval_expired"
	RefusedApprovalMismatch = "approval_mismatch"
	RefusedLoop             = "loop_detected"
	// RefusedTurnEnded: the call's turn ended (a cancel, a budget, a
	// timeout, a person's stop) before the call started, or before it ran
	// again (after a transient failure, or a person's decision that it
	// did not happen).
	RefusedTurnEnded = "turn_ended"
)

// EffectInDoubtData is the data of effect.in_doubt.
type EffectInDoubtData struct {
	Step     int    `json:"step"`
	Index    int    `json:"index"`
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	EffectID string `json:"effect_id"`
	ActionID string `json:"action_id"`
	Reason   string `json:"reason"`
}

// NetworkConnectionData is the data of network.connection: a connection a tool
// call tried (from the sandbox through the egress proxy, or http_request),
// allowed or refused.
type NetworkConnectionData struct {
	Step   int    `json:"step"`
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Via is "proxy" (from the sandbox), "http_request" or "mcp" (an
	// MCP client; a listing's connections have Index -1 and the server's
	// name as Tool).
	Via     string `json:"via"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Address string `json:"address,omitempty"`
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
}

// Required actions and budgets.

// ActionRequiredData is the data of action.required.
type ActionRequiredData struct {
	Action Action `json:"action"`
}

// ActionResolvedData is the data of action.resolved.
type ActionResolvedData struct {
	ActionID string   `json:"action_id"`
	Type     string   `json:"type"`
	CallID   string   `json:"call_id,omitempty"`
	Decision Decision `json:"decision"`
	// DecisionSHA256 is the hash of the canonical decision body: deciding
	// again with the same body returns the first resu
	DecisionSHA256 string `json:"decision_sha256"`
	// Approved binds an approved call: its canonical arguments (edited or
	// not) and their SHA-256. Execution re-checks the hash.
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	ArgumentsSHA256 string          `json:"arguments_sha256,omitempty"`
	// Budget is the session's budget after an approved budget action.
	Budget *Budget `json:"budget,omitempty"`
	// Actor is who decided the action; nil when the engine did it by itself,
	// or in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
}

// BudgetUpdatedData is the data of budget.updated.
type BudgetUpdatedData struct {
	Budget Budget `json:"budget"`
	// Actor is who changed the budget; nil when the engine did it by itself,
	// or in a journal older than actors.
	Actor *Actor `json:"actor,omitempty"`
}

// BudgetWarningData is the data of budget.warning: usage passed 80 % of a hard
// limit.
type BudgetWarningData struct {
	Limit BudgetLimit `json:"limit"`
}

// BudgetExceededData is the data of budget.exceeded.
type BudgetExceededData struct {
	Limit string  `json:"limit"`
	Max   float64 `json:"max"`
	Used  float64 `json:"used"`
	// Tree is the root of the sub-agent tree whose limit was reached (Max
	// and Used are then the whole tree's), "" for the session's own.
	Tree string `json:"tree,omitempty"`
}

// Checkpoints, artifacts and the workspace (workspace.changed carries a
// WorkspaceChange, files.go).

// CheckpointCreatedData is the data of checkpoint.created.
type CheckpointCreatedData struct {
	Checkpoint Checkpoint `json:"checkpoint"`
}

// ArtifactCreatedData is the data of artifact.created.
type ArtifactCreatedData struct {
	Artifact Artifact `json:"artifact"`
}

// EnvironmentLostData is the data of environment.lost: the session's
// workspace was gone when a tool was about to run.
type EnvironmentLostData struct {
	Reason string `json:"reason"`
}

// EnvironmentOpenedData is the data of environment.opened: the runner the
// session's environment lives on, and whether it was provisioned anew
// there.
type EnvironmentOpenedData struct {
	Runner string `json:"runner"`
	// RunnerKeyID is the id of the API key the runner connected with: the
	// session goes back only to a runner of that name holding that key
	// (another key of the project may take a name its holder left).
	RunnerKeyID string `json:"runner_key_id,omitempty"`
	Provisioned bool   `json:"provisioned"`
}

// EnvironmentStoppedData is the data of environment.stopped: the session's
// environment was freed at Snapshot (the digest of its workspace's whole
// content, which the next call restores); Runner is the runner it lived on
// ("": the server's node).
type EnvironmentStoppedData struct {
	Reason   string `json:"reason"`
	Snapshot string `json:"snapshot"`
	Runner   string `json:"runner,omitempty"`
}

// EnvironmentStoppingData is the data of environment.stopping: the
// snapshot an idle stop is about to stop the environment at (on Runner,
// "": the server's node). Until the next checkpoint, it is the snapshot
// the session's workspace is restored from, stopped or lost.
// PersonChangesThrough is the seq of the last person's change
// (workspace.changed) the snapshot holds, applied to the workspace before
// it was taken: only the changes after it are applied again on a copy
// restored from it (0: none, all of them are).
type EnvironmentStoppingData struct {
	Reason               string `json:"reason"`
	Snapshot             string `json:"snapshot"`
	Runner               string `json:"runner,omitempty"`
	PersonChangesThrough int64  `json:"person_changes_through,omitempty"`
}

// EnvironmentStopFailedData is the data of environment.stop_failed: why an
// idle stop did not happen (it is tried again later, twice as late after
// each refusal in a row).
type EnvironmentStopFailedData struct {
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// EnvironmentProvisionedData is the data of environment.provisioned: a
// stopped environment was made anew (on Runner, "": the server's node)
// for a call that needs it.
type EnvironmentProvisionedData struct {
	Runner string `json:"runner,omitempty"`
}

// EnvironmentRestoredData is the data of environment.restored: the workspace
// was recreated from a checkpoint's snapshot (none: empty).
type EnvironmentRestoredData struct {
	CheckpointID string `json:"checkpoint_id,omitempty"`
	Snapshot     string `json:"snapshot,omitempty"`
	Files        int    `json:"files"`
	Bytes        int64  `json:"bytes"`
	// Replayed lists the calls of the current step, made after the
	// snapshot, that were run again (idempotent ones) to bring the
	// workspace back to where the journal says it is; Missing those whose
	// changes could not be brought back (irreversible ones, or a replay
	// that failed).
	Replayed []string `json:"replayed,omitempty"`
	Missing  []string `json:"missing,omitempty"`
	// Note is what the model is told.
	Note string `json:"note"`
}

// Waits and signals.

// Wait kinds.
const (
	WaitTimer  = "timer"
	WaitSignal = "signal"
	// WaitAgents: wait_agents, until all (or any) of IDs completed.
	WaitAgents = "agents"
	// WaitSubagentSlot: a spawn_agent call waits until fewer than
	// MaxRunning children run.
	WaitSubagentSlot = "subagent_slot"
)

// Modes of wait_agents.
const (
	WaitAll = "all"
	WaitAny = "any"
)

// WaitStartedData is the data of wait.started: the call waits, holding no
// worker, until Until (a timer, or a signal's timeout) or a signal named
// Name.
type WaitStartedData struct {
	Step   int        `json:"step"`
	Index  int        `json:"index"`
	CallID string     `json:"call_id"`
	Tool   string     `json:"tool"`
	Kind   string     `json:"kind"`
	Name   string     `json:"name,omitempty"`
	Until  *time.Time `json:"until,omitempty"`
	// IDs and Mode: the children a wait_agents call waits for.
	IDs  []string `json:"ids,omitempty"`
	Mode string   `json:"mode,omitempty"`
	// MaxRunning: a subagent_slot wait ends when fewer children run.
	MaxRunning int `json:"max_running,omitempty"`
}

// SignalReceivedData is the data of signal.received.
type SignalReceivedData struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Sub-agents.

// SubagentSpawnedData is the data of subagent.spawned, in the parent's journal:
// the spawn_agent call (Step, Index, CallID) created the child session
// ChildID, in the same transaction as the child's own session.created.
type SubagentSpawnedData struct {
	Step    int      `json:"step"`
	Index   int      `json:"index"`
	CallID  string   `json:"call_id"`
	ChildID string   `json:"child_id"`
	Agent   AgentRef `json:"agent"`
	Input   string   `json:"input"`
	// Budget is the share of the parent's remaining budget the child got.
	Budget Budget `json:"budget"`
}

// SubagentCompletedData is the data of subagent.completed, in the parent's
// journal: the child ChildID reached a final status. Its usage rolls up into
// the parent's (Usage is the child's whole tree's, cost included).
type SubagentCompletedData struct {
	ChildID string `json:"child_id"`
	// TurnID is the child's turn that ended; Status its end (completed,
	// failed, cancelled).
	TurnID     string     `json:"turn_id"`
	Status     TurnStatus `json:"status"`
	StopReason string     `json:"stop_reason,omitempty"`
	Output     string     `json:"output,omitempty"`
	Error      string     `json:"error,omitempty"`
	Artifacts  []Artifact `json:"artifacts,omitempty"`
	Usage      Usage      `json:"usage"`
}

// SubagentReportedData is the data of subagent.reported, in the child's
// journal: its parent has the subagent.completed of turn TurnID.
type SubagentReportedData struct {
	TurnID string `json:"turn_id"`
}

// SubagentCancelRequestedData is the data of subagent.cancel_requested, in the
// parent's journal: the child was asked to stop because the parent's turn
// that spawned it ended.
type SubagentCancelRequestedData struct {
	ChildID string `json:"child_id"`
	Reason  string `json:"reason"`
}

// MCP servers.

// MCPToolsListedData is the data of mcp.tools_listed: the tools an MCP server
// offered, as the model sees them from this event on. The engine builds the
// model's tool definitions from the latest such event of each server, never
// from a live listing, so a resumed session offers exactly what the journal
// says it offered.
type MCPToolsListedData struct {
	Server string `json:"server"`
	// Reason is why the server was listed: "first" (no listing in the
	// journal yet), "turn" (a turn started), "restart" (the server was
	// started again) or "parent" (a sub-agent's first listing, taken from
	// its parent's journal without starting the server).
	Reason string `json:"reason"`
	// ServerName and ServerVersion are what the server said it is.
	ServerName    string    `json:"server_name,omitempty"`
	ServerVersion string    `json:"server_version,omitempty"`
	Tools         []MCPTool `json:"tools"`
	// Hidden are the server's tools the agent does not offer the model:
	// not in its allowlist, or with a name the model cannot call.
	Hidden []MCPHiddenTool `json:"hidden,omitempty"`
	// SHA256 is the hash of Tools' canonical JSON: a listing is journaled
	// only when it differs from the last one.
	SHA256 string `json:"sha256"`
}

// MCPTool is one tool of an MCP server as the agent offers it.
type MCPTool struct {
	// Name is the model-visible name, "<server>__<tool>"; Tool is the
	// server's own name for it.
	Name        string          `json:"name"`
	Tool        string          `json:"tool"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	// ReadOnlyHint, IdempotentHint and DestructiveHint are the server's
	// annotations, as it sent them (nil: not sent).
	ReadOnlyHint    *bool `json:"read_only_hint,omitempty"`
	IdempotentHint  *bool `json:"idempotent_hint,omitempty"`
	DestructiveHint *bool `json:"destructive_hint,omitempty"`
	// Effect is the class calls get, and EffectFrom why: "config" (the
	// agent's effects), "annotations" (trusted hints) or "default".
	Effect     EffectClass `json:"effect"`
	EffectFrom string      `json:"effect_from"`
}

// MCPHiddenTool is a tool of an MCP server that the model is not offered.
type MCPHiddenTool struct {
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

// MCPServerLostData is the data of mcp.server_lost: the server died, or its
// connection broke, while a call to it ran, so the call's outcome is
// unknown. The effect rules decide what happens to the call.
type MCPServerLostData struct {
	Step   int    `json:"step"`
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Server string `json:"server"`
	Error  string `json:"error"`
	// Stderr is the end of what a stdio server wrote to its standard
	// error, for the person who looks into it.
	Stderr string `json:"stderr,omitempty"`
}

// The trajectory monitor.

// MonitorFindingData is the data of monitor.finding: a built-in detector saw
// a pattern across the session's journal. It never holds a secret's value
// or a fragment of one: Summary names what was seen (a secret by its name).
type MonitorFindingData struct {
	// Detector is refused_connections, secret_probe, capability_widening,
	// escape_signatures, secret_like_egress or repeated_failure.
	Detector string `json:"detector"`
	// Severity is low, medium or high.
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	// Evidence are the seqs of the events that show it, oldest first.
	Evidence []int64 `json:"evidence"`
	// Action is what the agent's monitor spec does with the detector's
	// findings: log, ask (a monitor action) or stop (the turn ends).
	Action string `json:"action"`
	// TreeEvidence are the events of other sessions of the tree that show
	// it too, for a finding the tree's sessions made together (a secret's
	// fragments sent by two children): none for a finding of this
	// session's events only.
	TreeEvidence []MonitorEvidence `json:"tree_evidence,omitempty"`
}

// MonitorEvidence is an event of another session of the tree.
type MonitorEvidence struct {
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
}
