package longhaultype

import (
	"encoding/json"
	"time"
)

// ActionType is the kind of a required action.
type ActionType string

// Required action types (API.md "Required actions").
const (
	ActionApproval     ActionType = "approval"
	ActionFunctionCall ActionType = "function_call"
	ActionInput        ActionType = "input"
	ActionInDoubt      ActionType = "in_doubt"
	ActionBudget       ActionType = "budget"
	// ActionEnvironmentConnection: the session's environment lives on a
	// runner (environment.runner) and no matching runner is connected.
	// It resolves by itself when one connects; the application may stop
	// the turn instead (decision stop).
	ActionEnvironmentConnection ActionType = "environment_connection"
	// ActionBrowserPermission: the browser tool asks to visit a site
	// (origin) for the first time in the session. Decided with
	// {"decision": "allow", "scope": "once"|"session", "request_id": …}
	// or {"decision": "deny", "reason": …, "request_id": …}; the
	// request_id must be the action's own.
	ActionBrowserPermission ActionType = "browser_permission"
	// ActionMonitor: a detector of the trajectory monitor whose action is
	// ask saw something (Finding), or the model monitor answered pause
	// (Review): the session waits until a person lets it continue
	// (decision continue) or stops its turn (decision stop).
	ActionMonitor ActionType = "monitor"
)

// ActionStatus is pending until decided.
type ActionStatus string

// Action statuses.
const (
	ActionPending   ActionStatus = "pending"
	ActionResolved  ActionStatus = "resolved"
	ActionCancelled ActionStatus = "cancelled"
)

// Action is something only the application or a person can supply.
type Action struct {
	ID              string          `json:"id"`
	SessionID       string          `json:"session_id"`
	Type            ActionType      `json:"type"`
	Status          ActionStatus    `json:"status"`
	TurnID          string          `json:"turn_id"`
	Step            int             `json:"step,omitempty"`
	CallID          string          `json:"call_id,omitempty"`
	Tool            string          `json:"tool,omitempty"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	ArgumentsSHA256 string          `json:"arguments_sha256,omitempty"`
	EffectID        string          `json:"effect_id,omitempty"`
	IdempotencyKey  string          `json:"idempotency_key,omitempty"`
	Summary         string          `json:"summary,omitempty"`
	Affects         []string        `json:"affects,omitempty"`
	Evidence        []string        `json:"evidence,omitempty"`
	Consequence     string          `json:"consequence,omitempty"`
	// Call is the tool call as code, tool(name=value, …), beside Summary's
	// plain words (the whole arguments are in Arguments).
	Call     string   `json:"call,omitempty"`
	Question string   `json:"question,omitempty"`
	Choices  []string `json:"choices,omitempty"`
	// Kind is an input action's kind: "text" (an answer, the default) or
	// "file" (an upload to Path: PUT /v1/sessions/{id}/files/{path}
	// ?action_id=…).
	Kind string `json:"kind,omitempty"`
	Path string `json:"path,omitempty"`
	// Policy names the rule that asked for an approval.
	Policy string `json:"policy,omitempty"`
	// Approvers is who may decide the approval, when its policy says
	// (nil: anyone whose role may decide actions).
	Approvers *Approvers `json:"approvers,omitempty"`
	// Limit is the budget limit a budget action is about, with the usage
	// that reached it.
	Limit *BudgetLimit `json:"limit,omitempty"`
	Usage *Usage       `json:"usage,omitempty"`
	// Runner is the runner an environment_connection action waits for
	// (the agent's environment.runner), Reason why it cannot be reached.
	Runner *RunnerSelector `json:"runner,omitempty"`
	Reason string          `json:"reason,omitempty"`
	// RequestID, Origin and Purpose are a browser_permission action's: the
	// unguessable id a decision must name ("brq_…"), the site (scheme,
	// host and port) the browser asks to visit, and why, in the agent's
	// words.
	RequestID string `json:"request_id,omitempty"`
	Origin    string `json:"origin,omitempty"`
	Purpose   string `json:"purpose,omitempty"`
	// Finding is what a monitor action asks about: the detector's
	// finding, as journaled (monitor.finding).
	Finding *MonitorFindingData `json:"finding,omitempty"`
	// Review is what a monitor action raised by the model monitor asks
	// about: its review, as journaled (monitor.reviewed), without the
	// prompt.
	Review     *MonitorReviewedData `json:"review,omitempty"`
	CreatedAt  time.Time            `json:"created_at"`
	ExpiresAt  *time.Time           `json:"expires_at"`
	ResolvedAt *time.Time           `json:"resolved_at,omitempty"`
	Resolution json.RawMessage      `json:"resolution,omitempty"`
	// ResolvedBy is who decided the action (the actor on its
	// action.resolved event); nil while pending, or when it resolved by
	// itself (expiry, a cancel, the engine).
	ResolvedBy *Actor `json:"resolved_by,omitempty"`
}

// Decision is the body of POST /v1/sessions/{id}/actions/{action_id}. Which
// fields apply depends on the action's type (API.md).
type Decision struct {
	// Decision is approve|reject|stop for approvals, happened|did_not_happen|skip
	// for in-doubt effects, approve|stop for budgets.
	Decision  string          `json:"decision,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
	Answer    string          `json:"answer,omitempty"`
	Budget    *Budget         `json:"budget,omitempty"`
	// ArgumentsSHA256, when given with an approval, must equal the action's
	// arguments_sha256: it proves the person saw the arguments being
	// approved (a stale view is a 409, never a silent approval).
	ArgumentsSHA256 string `json:"arguments_sha256,omitempty"`
	// Scope and RequestID answer a browser_permission action: scope is
	// once (this one call's navigations) or session (the rest of the
	// session); request_id must be the action's request_id (another is a
	// 409: a decision is matched by the request it answers).
	Scope     string `json:"scope,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Approval and budget decisions.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionStop    = "stop"
	// DecisionExpired is recorded (never sent) when an approval expired
	// before anyone decided it.
	DecisionExpired = "expired"
	// DecisionConnected is recorded (never sent) when an
	// environment_connection action resolved by itself: a matching
	// runner connected.
	DecisionConnected = "connected"
	// DecisionUnpin answers an environment_connection action of a session
	// pinned to a runner (by its name and key): the pin is dropped, and
	// the environment opens on any runner that matches the agent's
	// environment.runner, restored from the last checkpoint if that
	// runner lacks the workspace. It is how a runner whose key was
	// revoked and replaced (the same name, a new key) takes its sessions
	// back: a person's decision, never the runner's.
	DecisionUnpin = "unpin"
	// DecisionContinue lets a session a monitor action stopped go on.
	DecisionContinue = "continue"
)

// Browser permission decisions and scopes.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	ScopeOnce     = "once"
	ScopeSession  = "session"
)

// BudgetLimit is one budget dimension that a soft threshold or a hard limit
// was reached on.
type BudgetLimit struct {
	// Name is the dimension: cost_usd, tokens, model_calls, tool_calls or
	// wall_seconds.
	Name string  `json:"name"`
	Soft float64 `json:"soft,omitempty"`
	Max  float64 `json:"max,omitempty"`
	Used float64 `json:"used"`
}

// In-doubt decisions.
const (
	DecisionHappened     = "happened"
	DecisionDidNotHappen = "did_not_happen"
	DecisionSkip         = "skip"
)

// ResolutionReconciled is the resolution of an effect whose outcome was
// unknown after a crash and that the tool's reconcile probe found had
// happened: the engine recorded the probe's output as the call's result
// without asking anyone.
const ResolutionReconciled = "reconciled"

// EffectClass says what re-running a tool does to the world (DESIGN.md
// principle 3).
type EffectClass string

// Effect classes.
const (
	EffectRead         EffectClass = "read"
	EffectIdempotent   EffectClass = "idempotent"
	EffectIrreversible EffectClass = "irreversible"
)

// Valid reports whether c is a known class.
func (c EffectClass) Valid() bool {
	return c == EffectRead || c == EffectIdempotent || c == EffectIrreversible
}

// EffectStatus is the state of one ledger row.
type EffectStatus string

// Effect statuses.
const (
	EffectStarted   EffectStatus = "started"
	EffectSucceeded EffectStatus = "succeeded"
	EffectFailed    EffectStatus = "failed"
	EffectInDoubt   EffectStatus = "in_doubt"
	EffectResolved  EffectStatus = "resolved"
)

// Effect is one row of the side-effect ledger: one tool call that ran (or may
// have run) against the world.
type Effect struct {
	ID              string       `json:"id"`
	SessionID       string       `json:"session_id"`
	TurnID          string       `json:"turn_id"`
	Step            int          `json:"step"`
	CallIndex       int          `json:"call_index"`
	CallID          string       `json:"call_id"`
	Tool            string       `json:"tool"`
	Class           EffectClass  `json:"class"`
	ArgumentsSHA256 string       `json:"arguments_sha256"`
	IdempotencyKey  string       `json:"idempotency_key"`
	Status          EffectStatus `json:"status"`
	Attempts        int          `json:"attempts"`
	Resolution      string       `json:"resolution,omitempty"`
	Error           string       `json:"error,omitempty"`
	StartedAt       time.Time    `json:"started_at"`
	FinishedAt      *time.Time   `json:"finished_at"`
	// Summary says in plain language what the call does, naming who or
	// what it affects first ("Write notes.md (1204 bytes)", "Email to
	// bob@example.com: “Q3”"); two calls of one tool read apart.
	Summary string `json:"summary,omitempty"`
	// Result says in one line what came of the call: its error, or what
	// its output says ("exit 0: 3 rows", "wrote 1204 bytes to notes.md");
	// empty while it runs.
	Result string `json:"result,omitempty"`
	// ArgumentsEventSeq is the journal event that holds the arguments the
	// call ran with (tool.requested, or the action.resolved of an approval
	// that edited them); ResultEventSeq the one that holds its last outcome
	// (tool.completed or tool.failed). Zero for effects recorded before
	// the ledger kept them.
	ArgumentsEventSeq int64 `json:"arguments_event_seq,omitempty"`
	ResultEventSeq    int64 `json:"result_event_seq,omitempty"`
	// Arguments and Output are the whole arguments and output, read from
	// those events: set only by GET /v1/sessions/{id}/effects/{effect_id}
	// (a list carries Summary and Result).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
}

// ListActionsParams filters GET /v1/actions, the inbox of required actions
// across sessions.
type ListActionsParams struct {
	// Status is pending, resolved or cancelled ("": all).
	Status string
	// Type is one of the action types ("": all).
	Type string
	// SessionID restricts the list to one session ("": all).
	SessionID string
	// Project restricts the list to one project's sessions ("": all the
	// caller sees: every project for an admin key, else its own).
	Project string
	Cursor  string
	Limit   int
}
