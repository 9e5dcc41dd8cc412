package longhaultype

import "time"

// Trace is GET /v1/sessions/{id}/trace: a tree of spans derived from the
// session's journal. The roots are the session's turns, in order; each turn's
// children are its steps and the model calls made for the loop rather than
// for a step (compaction, acceptance verification). The same journal always
// gives the same trace: span ids are derived from turn ids, step numbers,
// call indexes and journal positions, never from the clock.
type Trace struct {
	SessionID string   `json:"session_id"`
	Agent     AgentRef `json:"agent"`
	// LastEventSeq is the journal position the trace was derived from.
	LastEventSeq int64 `json:"last_event_seq"`
	// AsOf is the time of that event: spans still open are measured up to
	// it.
	AsOf time.Time `json:"as_of"`
	// Usage is the session's total, as in the session: its turns' usage
	// (which includes what sub-agents reported during them) plus what
	// sub-agents reported while no turn ran.
	Usage Usage  `json:"usage"`
	Spans []Span `json:"spans"`
}

// SpanKind says what a span stands for.
type SpanKind string

// Span kinds.
const (
	// SpanTurn is one turn, from turn.started (turn.created while it is
	// queued) to its end.
	SpanTurn SpanKind = "turn"
	// SpanStep is one step: a model call and the tool calls it asked for.
	SpanStep SpanKind = "step"
	// SpanModelCall is one model call attempt, from model.requested to its
	// answer or failure. Purpose tells compaction and verification calls
	// (children of the turn) from a step's calls (children of the step).
	SpanModelCall SpanKind = "model_call"
	// SpanToolCall is one tool call, from tool.requested to its final
	// outcome, across attempts, approvals and waits.
	SpanToolCall SpanKind = "tool_call"
	// SpanAttempt is an execution of a tool call that failed transiently
	// and was retried; the last attempt is the tool call span itself.
	SpanAttempt SpanKind = "attempt"
	// SpanAction is a required action, from action.required to its
	// resolution: a child of the tool call it is about, else of the turn.
	SpanAction SpanKind = "action"
	// SpanWait is a durable wait (sleep, wait_for_signal) of a tool call,
	// or a pause of a turn (wait_kind "pause").
	SpanWait SpanKind = "wait"
	// SpanSubagent is a child session spawned by a spawn_agent call, from
	// subagent.spawned to subagent.completed; it may outlive its turn.
	SpanSubagent SpanKind = "subagent"
)

// SpanStatus is the outcome of a span.
type SpanStatus string

// Span statuses.
const (
	SpanOK        SpanStatus = "ok"
	SpanError     SpanStatus = "error"
	SpanRunning   SpanStatus = "running"
	SpanCancelled SpanStatus = "cancelled"
	// SpanQueued is a turn that has not started.
	SpanQueued SpanStatus = "queued"
)

// Open reports whether the span has not ended.
func (s SpanStatus) Open() bool { return s == SpanRunning || s == SpanQueued }

// Span is one node of a trace.
type Span struct {
	// ID is unique in the trace and stable: the turn id for a turn,
	// "{turn}/step/{n}" for a step, and so on below it.
	ID       string   `json:"id"`
	ParentID *string  `json:"parent_id"`
	Kind     SpanKind `json:"kind"`
	// Name is short, for people: "turn 2", "step 3", "model demo",
	// "tool write_file", "subagent researcher".
	Name  string     `json:"name"`
	Start time.Time  `json:"start"`
	End   *time.Time `json:"end"`
	// DurationMS is End-Start; for an open span, Trace.AsOf-Start.
	DurationMS int64      `json:"duration_ms"`
	Status     SpanStatus `json:"status"`
	// Error says why a span with status error failed.
	Error string `json:"error,omitempty"`
	// Usage is what the span consumed: a model call's tokens and cost; a
	// step's model calls (and its tool executions' count); a turn's steps,
	// its compaction and verification calls and what its sub-agents
	// reported during it (as the turn's usage in the API); a sub-agent's
	// whole tree, as it last reported. Nil on spans that consume nothing
	// themselves (tool calls, actions, waits).
	Usage      *Usage         `json:"usage,omitempty"`
	Attributes SpanAttributes `json:"attributes"`
	Children   []Span         `json:"children"`
}

// SpanAttributes describe a span; each kind sets the fields that apply to it.
type SpanAttributes struct {
	TurnID    string `json:"turn_id,omitempty"`
	TurnIndex int    `json:"turn_index,omitempty"`
	Step      int    `json:"step,omitempty"`
	// StopReason is a failed turn's stop reason, or the finish reason a
	// model gave ("end_turn", "tool_calls"...).
	StopReason string `json:"stop_reason,omitempty"`

	// Model calls.
	Provider      string `json:"provider,omitempty"`
	Model         string `json:"model,omitempty"`
	ResponseModel string `json:"response_model,omitempty"`
	// Purpose is "compaction" or "verification" for a call made for the
	// loop, empty for a step's call.
	Purpose       string `json:"purpose,omitempty"`
	Attempt       int    `json:"attempt,omitempty"`
	Position      int    `json:"position,omitempty"`
	ContextTokens int    `json:"context_tokens,omitempty"`
	// ErrorKind classifies a failed model call (rate_limit, server...).
	ErrorKind string `json:"error_kind,omitempty"`
	// Retried: the failed call was tried again.
	Retried bool `json:"retried,omitempty"`
	// TokensBefore and TokensAfter are a compaction's context sizes.
	TokensBefore int `json:"tokens_before,omitempty"`
	TokensAfter  int `json:"tokens_after,omitempty"`
	// AcceptanceMet is a verification's verdict.
	AcceptanceMet *bool `json:"acceptance_met,omitempty"`

	// Tool calls.
	Tool     string `json:"tool,omitempty"`
	CallID   string `json:"call_id,omitempty"`
	CallKind string `json:"call_kind,omitempty"`
	// Index is the call's position among the step's calls.
	Index          *int        `json:"index,omitempty"`
	EffectID       string      `json:"effect_id,omitempty"`
	EffectClass    EffectClass `json:"effect_class,omitempty"`
	IdempotencyKey string      `json:"idempotency_key,omitempty"`
	// EffectStatus is in_doubt when the effect's outcome became unknown.
	EffectStatus EffectStatus `json:"effect_status,omitempty"`
	// Attempts counts the call's executions (retries included).
	Attempts int `json:"attempts,omitempty"`
	// Policy is the decision a policy took on the call.
	Policy PolicyDecision `json:"policy,omitempty"`
	// Refused says why a call never ran (policy_denied, rejected...).
	Refused string `json:"refused,omitempty"`
	// Resolution says how an outcome was known when not by running the
	// tool (a person said it happened).
	Resolution string `json:"resolution,omitempty"`

	// Required actions.
	ActionID   string     `json:"action_id,omitempty"`
	ActionType ActionType `json:"action_type,omitempty"`
	Decision   string     `json:"decision,omitempty"`
	// DecidedBy is who decided the action (its action.resolved's actor).
	DecidedBy *Actor `json:"decided_by,omitempty"`

	// Waits.
	WaitKind   string     `json:"wait_kind,omitempty"`
	SignalName string     `json:"signal_name,omitempty"`
	WaitUntil  *time.Time `json:"wait_until,omitempty"`

	// Sub-agents.
	ChildSessionID string    `json:"child_session_id,omitempty"`
	Agent          *AgentRef `json:"agent,omitempty"`
	// ChildStatus is how the child's latest turn ended, as it reported.
	ChildStatus TurnStatus `json:"child_status,omitempty"`

	// Findings are the trajectory monitor's findings about the span (a
	// tool call whose events show them, else a step or a turn), one line
	// each: "detector (severity, action): summary".
	Findings []string `json:"findings,omitempty"`
}
