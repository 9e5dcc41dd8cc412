package longhaultype

import (
	"encoding/json"
	"time"
)

// SessionStatus is the lifecycle state of a session.
type SessionStatus string

// Session statuses (DESIGN.md "Lifecycle").
const (
	SessionQueued         SessionStatus = "queued"
	SessionRunning        SessionStatus = "running"
	SessionRequiresAction SessionStatus = "requires_action"
	SessionWaiting        SessionStatus = "waiting"
	SessionIdle           SessionStatus = "idle"
	SessionFailed         SessionStatus = "failed"
	SessionCancelled      SessionStatus = "cancelled"
	// SessionPaused: a person paused the session; it holds no worker and
	// runs nothing until resumed (POST /v1/sessions/{id}/resume).
	SessionPaused SessionStatus = "paused"
)

// Terminal reports whether no turn of the session is queued or running: the
// session only moves again when a client sends a follow-up turn.
func (s SessionStatus) Terminal() bool {
	return s == SessionIdle || s == SessionFailed || s == SessionCancelled
}

// TurnStatus is the lifecycle state of one turn.
type TurnStatus string

// Turn statuses.
const (
	TurnQueued         TurnStatus = "queued"
	TurnRunning        TurnStatus = "running"
	TurnRequiresAction TurnStatus = "requires_action"
	TurnWaiting        TurnStatus = "waiting"
	TurnCompleted      TurnStatus = "completed"
	TurnFailed         TurnStatus = "failed"
	TurnCancelled      TurnStatus = "cancelled"
)

// Done reports whether the turn has ended.
func (s TurnStatus) Done() bool {
	return s == TurnCompleted || s == TurnFailed || s == TurnCancelled
}

// Stop reasons carried by failed or cancelled sessions and turns.
const (
	StopBudgetExceeded   = "budget_exceeded"
	StopRetriesExhausted = "retries_exhausted"
	StopPolicyViolation  = "policy_violation"
	StopTimeout          = "timeout"
	StopProviderError    = "provider_error"
	StopSandboxError     = "sandbox_error"
	StopCancelled        = "cancelled"
	StopInternal         = "internal_error"
	// StopStopped: a person chose "stop" on an approval or budget action.
	StopStopped = "stopped"
	// StopMaxSteps, StopToolErrors and StopLoopDetected are the stop
	// conditions of an agent (AgentSpec).
	StopMaxSteps     = "max_steps"
	StopToolErrors   = "tool_errors"
	StopLoopDetected = "loop_detected"
)

// Budget holds a session's limits. A zero value means "no limit". Every Max has
// an optional Soft below it.
type Budget struct {
	MaxCostUSD      float64 `json:"max_cost_usd,omitempty"`
	SoftCostUSD     float64 `json:"soft_cost_usd,omitempty"`
	MaxTokens       int64   `json:"max_tokens,omitempty"`
	SoftTokens      int64   `json:"soft_tokens,omitempty"`
	MaxModelCalls   int64   `json:"max_model_calls,omitempty"`
	SoftModelCalls  int64   `json:"soft_model_calls,omitempty"`
	MaxToolCalls    int64   `json:"max_tool_calls,omitempty"`
	SoftToolCalls   int64   `json:"soft_tool_calls,omitempty"`
	MaxWallSeconds  int64   `json:"max_wall_seconds,omitempty"`
	SoftWallSeconds int64   `json:"soft_wall_seconds,omitempty"`
}

// BudgetPatch is the body of PATCH /v1/sessions/{id}/budget: each field
// given replaces that limit (0 removes it); fields left out are kept.
type BudgetPatch struct {
	MaxCostUSD      *float64 `json:"max_cost_usd,omitempty"`
	SoftCostUSD     *float64 `json:"soft_cost_usd,omitempty"`
	MaxTokens       *int64   `json:"max_tokens,omitempty"`
	SoftTokens      *int64   `json:"soft_tokens,omitempty"`
	MaxModelCalls   *int64   `json:"max_model_calls,omitempty"`
	SoftModelCalls  *int64   `json:"soft_model_calls,omitempty"`
	MaxToolCalls    *int64   `json:"max_tool_calls,omitempty"`
	SoftToolCalls   *int64   `json:"soft_tool_calls,omitempty"`
	MaxWallSeconds  *int64   `json:"max_wall_seconds,omitempty"`
	SoftWallSeconds *int64   `json:"soft_wall_seconds,omitempty"`
}

// Apply returns b with the patch's fields replaced.
func (p *BudgetPatch) Apply(b Budget) Budget {
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	seti := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&b.MaxCostUSD, p.MaxCostUSD)
	set(&b.SoftCostUSD, p.SoftCostUSD)
	seti(&b.MaxTokens, p.MaxTokens)
	seti(&b.SoftTokens, p.SoftTokens)
	seti(&b.MaxModelCalls, p.MaxModelCalls)
	seti(&b.SoftModelCalls, p.SoftModelCalls)
	seti(&b.MaxToolCalls, p.MaxToolCalls)
	seti(&b.SoftToolCalls, p.SoftToolCalls)
	seti(&b.MaxWallSeconds, p.MaxWallSeconds)
	seti(&b.SoftWallSeconds, p.SoftWallSeconds)
	return b
}

// Usage is what a session (or a turn) has consumed so far.
type Usage struct {
	InputTokens       int64   `json:"input_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens,omitempty"`
	OutputTokens      int64   `json:"output_tokens"`
	ReasoningTokens   int64   `json:"reasoning_tokens,omitempty"`
	CostUSD           float64 `json:"cost_usd"`
	ModelCalls        int64   `json:"model_calls"`
	ToolCalls         int64   `json:"tool_calls"`
	// MonitorCostUSD is the part of CostUSD the model monitor's calls
	// cost (monitor.reviewed, and its failed calls).
	MonitorCostUSD float64 `json:"monitor_cost_usd,omitempty"`
	// Estimated is set when a token count is an estimate, not the
	// provider's report (a provider that reports no usage, or the scripted
	// one without explicit usage): a total that includes one is marked too.
	Estimated bool `json:"estimated,omitempty"`
}

// Add accumulates o into u.
func (u *Usage) Add(o Usage) {
	u.Estimated = u.Estimated || o.Estimated
	u.InputTokens += o.InputTokens
	u.CachedInputTokens += o.CachedInputTokens
	u.OutputTokens += o.OutputTokens
	u.ReasoningTokens += o.ReasoningTokens
	u.CostUSD += o.CostUSD
	u.MonitorCostUSD += o.MonitorCostUSD
	u.ModelCalls += o.ModelCalls
	u.ToolCalls += o.ToolCalls
}

// Sub subtracts o from u. Estimated stays as it was: what remains may
// still include an estimate.
func (u *Usage) Sub(o Usage) {
	u.InputTokens -= o.InputTokens
	u.CachedInputTokens -= o.CachedInputTokens
	u.OutputTokens -= o.OutputTokens
	u.ReasoningTokens -= o.ReasoningTokens
	u.CostUSD -= o.CostUSD
	u.MonitorCostUSD -= o.MonitorCostUSD
	u.ModelCalls -= o.ModelCalls
	u.ToolCalls -= o.ToolCalls
}

// AgentRef names the agent version a session pinned when it started.
type AgentRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// Review is a person's verdict on a session's final artifact.
type Review struct {
	Accepted bool      `json:"accepted"`
	Note     string    `json:"note,omitempty"`
	At       time.Time `json:"at"`
	// ArtifactID is the final artifact reviewed, when the session has one.
	ArtifactID string `json:"artifact_id,omitempty"`
	// TurnID is the turn that delivered that artifact (empty when the
	// session has none).
	TurnID string `json:"turn_id,omitempty"`
}

// Session is the API's view of a durable session: a projection of its journal.
type Session struct {
	ID string `json:"id"`
	// Project is the project the session belongs to, and everything it
	// derives with it (sub-agents, forks, events, actions, artifacts...).
	Project            string        `json:"project"`
	Status             SessionStatus `json:"status"`
	Agent              AgentRef      `json:"agent"`
	Input              string        `json:"input,omitempty"`
	Goal               string        `json:"goal"`
	Constraints        []string      `json:"constraints"`
	AcceptanceCriteria []string      `json:"acceptance_criteria"`
	Budget             Budget        `json:"budget"`
	Usage              Usage         `json:"usage"`
	ParentID           *string       `json:"parent_id"`
	CurrentTurnID      string        `json:"current_turn_id"`
	LastCheckpoint     *string       `json:"last_checkpoint"`
	RequiredActions    []Action      `json:"required_actions"`
	StopReason         *string       `json:"stop_reason"`
	// CancelRequested is true from a cancel request until it has taken
	// effect (the turns are cancelled).
	CancelRequested bool            `json:"cancel_requested"`
	Review          *Review         `json:"review"`
	LastEventSeq    int64           `json:"last_event_seq"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	Metadata        json.RawMessage `json:"metadata"`
	WebhookURL      string          `json:"webhook_url,omitempty"`
	// WebhookSecret signs the notifications sent to WebhookURL: it is in
	// the response that creates the session, and nowhere else.
	WebhookSecret string `json:"webhook_secret,omitempty"`
	// ForkedFrom is set on a session forked from another's checkpoint.
	ForkedFrom *ForkRef `json:"forked_from,omitempty"`
	// Subagents are the sessions this one spawned (each with its own
	// sub-agents), only when asked for with ?include=subagents.
	Subagents []Session `json:"subagents,omitempty"`

	// PauseRequested is true from a pause request until it has taken
	// effect (the session is paused at its next safe point).
	PauseRequested bool `json:"pause_requested"`
	// PauseReason is the reason given for the pause requested or in
	// effect; PausedAt is when the pause in effect began.
	PauseReason string     `json:"pause_reason,omitempty"`
	PausedAt    *time.Time `json:"paused_at,omitempty"`
	// PauseParentID is set while the session's pause is its parent's
	// (a pause reaches every running sub-agent of the paused session):
	// the parent's id. The parent's resume resumes it.
	PauseParentID string `json:"pause_parent_id,omitempty"`
	// PausedSeconds is how long the session's ended pauses lasted: its
	// wall-clock budget counts the time since CreatedAt less this (and
	// less the pause in effect, since PausedAt).
	PausedSeconds float64 `json:"paused_seconds,omitempty"`

	// CreatedBy is who created the session (the actor on
	// session.created); nil for sessions created before actors were
	// recorded.
	CreatedBy *Actor `json:"created_by,omitempty"`
}

// Turn is one unit of requested work inside a session.
type Turn struct {
	ID         string     `json:"id"`
	SessionID  string     `json:"session_id"`
	Index      int        `json:"index"`
	Status     TurnStatus `json:"status"`
	Input      string     `json:"input"`
	Output     string     `json:"output,omitempty"`
	StopReason *string    `json:"stop_reason"`
	Error      string     `json:"error,omitempty"`
	Steps      int        `json:"steps"`
	Usage      Usage      `json:"usage"`
	// Acceptance is the last verdict on the turn's final answer against
	// the session's acceptance criteria (nil: none were checked).
	Acceptance  *AcceptanceVerdict `json:"acceptance,omitempty"`
	CreatedAt   time.Time          `json:"created_at"`
	StartedAt   *time.Time         `json:"started_at"`
	CompletedAt *time.Time         `json:"completed_at"`
}

// CreateSessionRequest is the body of POST /v1/sessions. Exactly one of Agent
// and AgentSpec is set.
type CreateSessionRequest struct {
	Agent              string          `json:"agent,omitempty"`
	AgentSpec          *AgentSpec      `json:"agent_spec,omitempty"`
	Input              string          `json:"input"`
	Goal               string          `json:"goal,omitempty"`
	Constraints        []string        `json:"constraints,omitempty"`
	AcceptanceCriteria []string        `json:"acceptance_criteria,omitempty"`
	Budget             *Budget         `json:"budget,omitempty"`
	Metadata           json.RawMessage `json:"metadata,omitempty"`
	WebhookURL         string          `json:"webhook_url,omitempty"`
	// Project is the project the session belongs to: only an admin key
	// may name one (another key's sessions are in its own project);
	// default DefaultProject.
	Project string `json:"project,omitempty"`
}

// CreateTurnRequest is the body of POST /v1/sessions/{id}/turns.
type CreateTurnRequest struct {
	Input string `json:"input"`
}

// CancelRequest is the body of POST /v1/sessions/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// SignalRequest is the body of POST /v1/sessions/{id}/signals.
type SignalRequest struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Signal is a signal delivered to a session.
type Signal struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Delivered says whether a wait_for_signal was waiting for it; if not,
	// it is kept until one does.
	Delivered bool      `json:"delivered"`
	At        time.Time `json:"at"`
}

// ForkRequest is the body of POST /v1/sessions/{id}/fork.
type ForkRequest struct {
	CheckpointID string `json:"checkpoint_id"`
	// Input, when given, starts a new turn in the fork.
	Input string `json:"input,omitempty"`
	// WebhookURL, when given, is where the fork's notifications go
	// instead of its origin's webhook_url ("": nowhere). Absent, the fork
	// keeps its origin's. Either way a fork with a webhook_url gets a
	// signing secret of its own, returned once as webhook_secret in the
	// answer that creates it.
	WebhookURL *string `json:"webhook_url,omitempty"`
}

// ForkRef links a forked session to its origin.
type ForkRef struct {
	SessionID    string `json:"session_id"`
	CheckpointID string `json:"checkpoint_id"`
	EventSeq     int64  `json:"event_seq"`
}

// ReviewRequest is the body of POST /v1/sessions/{id}/review: a person's
// verdict on the session's final artifact. A rejection with Continue starts
// a new turn whose input is the note.
type ReviewRequest struct {
	Accepted *bool  `json:"accepted"`
	Note     string `json:"note,omitempty"`
	Continue bool   `json:"continue,omitempty"`
}

// AddConstraintRequest is the body of POST /v1/sessions/{id}/constraints: a
// constraint a person adds mid-session. It is pinned: placed verbatim in
// every later model context, never summarised.
type AddConstraintRequest struct {
	Constraint string `json:"constraint"`
}

// List is the envelope of every list endpoint.
type List[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// ListSessionsParams filters and pages GET /v1/sessions.
type ListSessionsParams struct {
	// Project keeps one project's sessions ("": all the caller sees:
	// every project for an admin key, else its own).
	Project  string
	Status   SessionStatus
	Agent    string
	ParentID string
	Cursor   string
	Limit    int
}

// SteerRequest is the body of POST /v1/sessions/{id}/steer: a message to
// the running turn, given to the model verbatim at its next call.
// Interrupt abandons a model call in flight and makes it again with the
// message.
type SteerRequest struct {
	Input     string `json:"input"`
	Interrupt bool   `json:"interrupt,omitempty"`
}

// PauseRequest is the body of POST /v1/sessions/{id}/pause.
type PauseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ResumeRequest is the body of POST /v1/sessions/{id}/resume (it has no
// fields yet; an empty body is accepted).
type ResumeRequest struct{}
