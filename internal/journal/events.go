package journal

import (
	"encoding/json"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// SessionCreated is the data of session.created.
type SessionCreated struct {
	Agent              lt.AgentRef     `json:"agent"`
	Input              string          `json:"input"`
	Goal               string          `json:"goal,omitempty"`
	Constraints        []string        `json:"constraints,omitempty"`
	AcceptanceCriteria []string        `json:"acceptance_criteria,omitempty"`
	Budget             lt.Budget       `json:"budget"`
	Metadata           json.RawMessage `json:"metadata,omitempty"`
	WebhookURL         string          `json:"webhook_url,omitempty"`
	ParentID           string          `json:"parent_id,omitempty"`
	// Workspace is the session whose workspace this one works in (a
	// sub-agent shares its root's); empty: its own.
	Workspace string `json:"workspace,omitempty"`
	// Depth is 0 for a session created through the API, its parent's + 1
	// for a sub-agent.
	Depth int `json:"depth,omitempty"`
}

// StatusChanged is the data of session.status_changed.
type StatusChanged struct {
	From       lt.SessionStatus `json:"from"`
	To         lt.SessionStatus `json:"to"`
	StopReason string           `json:"stop_reason,omitempty"`
}

// CancelRequested is the data of session.cancel_requested.
type CancelRequested struct {
	Reason string `json:"reason,omitempty"`
}

// TurnCreated is the data of turn.created.
type TurnCreated struct {
	TurnID string `json:"turn_id"`
	Index  int    `json:"index"`
	Input  string `json:"input"`
}

// TurnStarted is the data of turn.started.
type TurnStarted struct {
	TurnID string `json:"turn_id"`
	// Deadline is when the turn's timeout (turn_timeout_seconds) ends it,
	// if it has one: a wake time of a session parked in a wait.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// TurnCompleted is the data of turn.completed.
type TurnCompleted struct {
	TurnID string `json:"turn_id"`
	Output string `json:"output"`
	// Acceptance is the last verdict on the answer, when the session has
	// acceptance criteria.
	Acceptance *lt.AcceptanceVerdict `json:"acceptance,omitempty"`
}

// SessionForked is the data of session.forked: the events before it are a
// copy of another session's journal up to one of its checkpoints (ids
// renamed for this session); the effects they record are inherited, done.
type SessionForked struct {
	From lt.ForkRef `json:"from"`
}

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

// WaitStarted is the data of wait.started: the call waits, holding no
// worker, until Until (a timer, or a signal's timeout) or a signal named
// Name.
type WaitStarted struct {
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

// SignalReceived is the data of signal.received.
type SignalReceived struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// NetworkConnection is the data of network.connection: a connection a tool
// call tried (from the sandbox through the egress proxy, or http_request),
// allowed or refused.
type NetworkConnection struct {
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

// EnvironmentLost is the data of environment.lost: the session's
// workspace was gone when a tool was about to run.
type EnvironmentLost struct {
	Reason string `json:"reason"`
}

// EnvironmentRestored is the data of environment.restored: the workspace
// was recreated from a checkpoint's snapshot (none: empty).
type EnvironmentRestored struct {
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

// SessionReviewed is the data of session.reviewed.
type SessionReviewed struct {
	Review lt.Review `json:"review"`
}

// ConstraintAdded is the data of session.constraint_added: a person pinned
// a constraint mid-session.
type ConstraintAdded struct {
	Constraint string `json:"constraint"`
}

// ContextCompacted is the data of context.compacted: the conversation's
// first Items items (counted from the start of the session's transcript)
// are replaced, in what is sent to the model, by Summary. The journal keeps
// them all.
type ContextCompacted struct {
	Step         int      `json:"step"`
	Items        int      `json:"items"`
	TokensBefore int      `json:"tokens_before"`
	TokensAfter  int      `json:"tokens_after"`
	Summary      string   `json:"summary"`
	Forced       bool     `json:"forced,omitempty"`
	Usage        lt.Usage `json:"usage"`
	CostUSD      float64  `json:"cost_usd"`
	DurationMS   int64    `json:"duration_ms"`
}

// AcceptanceVerified is the data of acceptance.verified: the verification
// call's verdict on the final answer of step Step.
type AcceptanceVerified struct {
	Step       int                  `json:"step"`
	Verdict    lt.AcceptanceVerdict `json:"verdict"`
	Usage      lt.Usage             `json:"usage"`
	CostUSD    float64              `json:"cost_usd"`
	DurationMS int64                `json:"duration_ms"`
}

// TurnFailed is the data of turn.failed.
type TurnFailed struct {
	TurnID     string `json:"turn_id"`
	StopReason string `json:"stop_reason"`
	Error      string `json:"error,omitempty"`
}

// TurnCancelled is the data of turn.cancelled.
type TurnCancelled struct {
	TurnID string `json:"turn_id"`
	Reason string `json:"reason,omitempty"`
}

// Purposes of a model call other than a step of the loop.
const (
	PurposeCompaction   = "compaction"
	PurposeVerification = "verification"
)

// ModelRequested is the data of model.requested.
type ModelRequested struct {
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

// ModelDelta is the data of model.delta: streamed output of a call still
// running, coalesced (a crash may leave deltas of a call that never
// responded: only model.responded is the answer).
type ModelDelta struct {
	Step      int    `json:"step"`
	Attempt   int    `json:"attempt"`
	Purpose   string `json:"purpose,omitempty"`
	Text      string `json:"text,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
}

// ToolCall is a call the model asked for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ModelResponded is the data of model.responded.
type ModelResponded struct {
	Step       int           `json:"step"`
	Position   int           `json:"position"`
	Text       string        `json:"text,omitempty"`
	ToolCalls  []ToolCall    `json:"tool_calls,omitempty"`
	Usage      lt.Usage      `json:"usage"`
	CostUSD    float64       `json:"cost_usd"`
	DurationMS int64         `json:"duration_ms"`
	Reasoning  *lt.Reasoning `json:"reasoning,omitempty"`
	Model      string        `json:"model,omitempty"`
	StopReason string        `json:"stop_reason,omitempty"`
}

// ModelFailed is the data of model.failed: a call that returned an error.
type ModelFailed struct {
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
	Usage *lt.Usage `json:"usage,omitempty"`
}

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

// ToolRequested is the data of tool.requested.
type ToolRequested struct {
	Step   int    `json:"step"`
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Server is the MCP server of a tool of kind mcp (Tool is then
	// "<server>__<tool>").
	Server          string          `json:"server,omitempty"`
	Kind            string          `json:"kind"`
	Class           lt.EffectClass  `json:"effect"`
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsSHA256 string          `json:"arguments_sha256"`
}

// ToolStarted is the data of tool.started: the effect is in the ledger before
// the tool runs.
type ToolStarted struct {
	Step   int    `json:"step"`
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Server is the MCP server of a tool of kind mcp (Tool is then
	// "<server>__<tool>").
	Server         string         `json:"server,omitempty"`
	EffectID       string         `json:"effect_id"`
	IdempotencyKey string         `json:"idempotency_key"`
	Class          lt.EffectClass `json:"effect"`
	Attempt        int            `json:"attempt"`
}

// ToolCompleted is the data of tool.completed.
type ToolCompleted struct {
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

// ToolFailed is the data of tool.failed.
type ToolFailed struct {
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
}

// Reasons a call was refused (ToolFailed.Refused).
const (
	RefusedPolicy           = "policy_denied"
	RefusedRejected         = "rejected"
	RefusedStopped          = "stopped"
	RefusedApprovalExpired  = "approval_expired"
	RefusedApprovalMismatch = "approval_mismatch"
	RefusedLoop             = "loop_detected"
)

// PolicyDecided is the data of policy.decided: a policy matched a call
// before it ran (a call that no policy matches is allowed without one).
type PolicyDecided struct {
	Step      int               `json:"step"`
	Index     int               `json:"index"`
	CallID    string            `json:"call_id"`
	Tool      string            `json:"tool"`
	Decision  lt.PolicyDecision `json:"decision"`
	Rule      string            `json:"rule"`
	Reason    string            `json:"reason,omitempty"`
	EvalError string            `json:"eval_error,omitempty"`
}

// EffectInDoubt is the data of effect.in_doubt.
type EffectInDoubt struct {
	Step     int    `json:"step"`
	Index    int    `json:"index"`
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	EffectID string `json:"effect_id"`
	ActionID string `json:"action_id"`
	Reason   string `json:"reason"`
}

// ActionRequired is the data of action.required.
type ActionRequired struct {
	Action lt.Action `json:"action"`
}

// ActionResolved is the data of action.resolved.
type ActionResolved struct {
	ActionID string      `json:"action_id"`
	Type     string      `json:"type"`
	CallID   string      `json:"call_id,omitempty"`
	Decision lt.Decision `json:"decision"`
	// DecisionSHA256 is the hash of the canonical decision body: deciding
	// again with the same body returns the first result.
	DecisionSHA256 string `json:"decision_sha256"`
	// Approved binds an approved call: its canonical arguments (edited or
	// not) and their SHA-256. Execution re-checks the hash.
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	ArgumentsSHA256 string          `json:"arguments_sha256,omitempty"`
	// Budget is the session's budget after an approved budget action.
	Budget *lt.Budget `json:"budget,omitempty"`
}

// BudgetUpdated is the data of budget.updated.
type BudgetUpdated struct {
	Budget lt.Budget `json:"budget"`
}

// BudgetWarning is the data of budget.warning: usage passed 80 % of a hard
// limit.
type BudgetWarning struct {
	Limit lt.BudgetLimit `json:"limit"`
}

// CheckpointCreated is the data of checkpoint.created.
type CheckpointCreated struct {
	Checkpoint lt.Checkpoint `json:"checkpoint"`
}

// ArtifactCreated is the data of artifact.created.
type ArtifactCreated struct {
	Artifact lt.Artifact `json:"artifact"`
}

// BudgetExceeded is the data of budget.exceeded.
type BudgetExceeded struct {
	Limit string  `json:"limit"`
	Max   float64 `json:"max"`
	Used  float64 `json:"used"`
	// Tree is the root of the sub-agent tree whose limit was reached (Max
	// and Used are then the whole tree's), "" for the session's own.
	Tree string `json:"tree,omitempty"`
}

// SubagentSpawned is the data of subagent.spawned, in the parent's journal:
// the spawn_agent call (Step, Index, CallID) created the child session
// ChildID, in the same transaction as the child's own session.created.
type SubagentSpawned struct {
	Step    int         `json:"step"`
	Index   int         `json:"index"`
	CallID  string      `json:"call_id"`
	ChildID string      `json:"child_id"`
	Agent   lt.AgentRef `json:"agent"`
	Input   string      `json:"input"`
	// Budget is the share of the parent's remaining budget the child got.
	Budget lt.Budget `json:"budget"`
}

// SubagentCompleted is the data of subagent.completed, in the parent's
// journal: the child ChildID reached a final status. Its usage rolls up into
// the parent's (Usage is the child's whole tree's, cost included).
type SubagentCompleted struct {
	ChildID string `json:"child_id"`
	// TurnID is the child's turn that ended; Status its end (completed,
	// failed, cancelled).
	TurnID     string        `json:"turn_id"`
	Status     lt.TurnStatus `json:"status"`
	StopReason string        `json:"stop_reason,omitempty"`
	Output     string        `json:"output,omitempty"`
	Error      string        `json:"error,omitempty"`
	Artifacts  []lt.Artifact `json:"artifacts,omitempty"`
	Usage      lt.Usage      `json:"usage"`
}

// SubagentReported is the data of subagent.reported, in the child's
// journal: its parent has the subagent.completed of turn TurnID.
type SubagentReported struct {
	TurnID string `json:"turn_id"`
}

// SubagentCancelRequested is the data of subagent.cancel_requested, in the
// parent's journal: the child was asked to stop because the parent's turn
// that spawned it ended.
type SubagentCancelRequested struct {
	ChildID string `json:"child_id"`
	Reason  string `json:"reason"`
}
