package longhaultype

import "time"

// TaskReportParams selects GET /v1/reports/tasks. A task is a session; the
// report covers the tasks created in [Since, Until).
type TaskReportParams struct {
	// Since is an RFC 3339 time, or a duration before Until such as 7d,
	// 36h or 90m. Default "7d".
	Since string
	// Until is an RFC 3339 time, or a duration before now. Default: now.
	Until string
	// Agent keeps the tasks of one agent ("": all).
	Agent string
	// Project keeps the tasks of one project ("": all the caller sees:
	// every project for an admin key, else its own).
	Project string
	// IncludeSubagents reports sub-agent sessions as tasks of their own.
	// By default only root sessions are tasks, each with its sub-agents'
	// cost rolled into its usage.
	IncludeSubagents bool
	// Bucket is the series' step: hour or day. Default: hour for a window
	// of at most 48 hours, else day.
	Bucket string
	// Cursor and Limit page Data (1-500, default 50); totals and the series
	// always cover the whole window.
	Cursor string
	Limit  int
}

// Series buckets.
const (
	BucketHour = "hour"
	BucketDay  = "day"
)

// TaskReport is the body of GET /v1/reports/tasks: one page of per-task
// records, with totals and a time series over the whole window.
type TaskReport struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	Agent string    `json:"agent,omitempty"`
	// Project is the project reported on ("" for every project).
	Project          string `json:"project,omitempty"`
	IncludeSubagents bool   `json:"include_subagents"`
	Bucket           string `json:"bucket"`
	// RelaxAfterAsks is how many asks, all approved, flag a policy rule as
	// a candidate to relax (PolicyApprovals.Relax): the server's setting,
	// DefaultRelaxAfterAsks unless configured.
	RelaxAfterAsks int        `json:"relax_after_asks"`
	Totals         TaskTotals `json:"totals"`
	// Series has one bucket per hour or day of the window (UTC), oldest
	// first, empty ones included; a task counts in the bucket it was
	// created in.
	Series []TaskBucket `json:"series"`
	// Data is the page of tasks, newest first.
	Data       []TaskRecord `json:"data"`
	NextCursor *string      `json:"next_cursor"`
}

// TaskRecord is one task (session) of a report.
type TaskRecord struct {
	ID         string        `json:"id"`
	Agent      AgentRef      `json:"agent"`
	ParentID   *string       `json:"parent_id"`
	Goal       string        `json:"goal,omitempty"`
	Status     SessionStatus `json:"status"`
	StopReason *string       `json:"stop_reason"`
	CreatedAt  time.Time     `json:"created_at"`
	// EndedAt is when the session last reached idle, failed or cancelled
	// (null while it works); DurationSeconds runs from CreatedAt to it, or
	// to the report's time while the task works.
	EndedAt         *time.Time `json:"ended_at"`
	DurationSeconds float64    `json:"duration_seconds"`
	// InputComplete: the agent never asked a person for information (no
	// input action, i.e. no ask_human).
	InputComplete bool `json:"input_complete"`
	// Asks counts the required actions that needed a person: approvals,
	// inputs, in-doubt effects and budgets (function calls, answered by
	// the application, are not asks). AsksByType splits it.
	Asks       int                `json:"asks"`
	AsksByType map[ActionType]int `json:"asks_by_type"`
	// Retries counts failed model and tool attempts that were tried again.
	Retries int `json:"retries"`
	// LastCheckpoint is the latest checkpoint the task reached.
	LastCheckpoint *TaskCheckpoint `json:"last_checkpoint"`
	// Review is the latest verdict on the final artifact; Accepted is its
	// accepted flag (null: not reviewed).
	Review   *Review `json:"review"`
	Accepted *bool   `json:"accepted"`
	Turns    int     `json:"turns"`
	// Subagents counts the sub-agents the session spawned itself.
	Subagents int `json:"subagents"`
	// Usage is the task's consumption, its sub-agents' rolled in as each
	// finishes (as on the session object), without what a fork inherited
	// from its origin. CostUSD is Usage.CostUSD: ModelCostUSD (this
	// session's own model calls) plus SubagentCostUSD.
	Usage           Usage   `json:"usage"`
	CostUSD         float64 `json:"cost_usd"`
	ModelCostUSD    float64 `json:"model_cost_usd"`
	SubagentCostUSD float64 `json:"subagent_cost_usd"`
	// MonitorCostUSD is the part of CostUSD the model monitor's reviews
	// cost (Usage.MonitorCostUSD: its sub-agents' monitors included).
	MonitorCostUSD float64 `json:"monitor_cost_usd"`
	// DecisionsByActor counts the decisions people made on the task, by
	// who made them (most first): actions decided, reviews, cancels,
	// steers, pauses and resumes, budget changes, pinned constraints and
	// workspace changes. A sub-agent's count in its own record.
	DecisionsByActor []ActorCount `json:"decisions_by_actor,omitempty"`
}

// ActorCount is how many decisions one actor made.
type ActorCount struct {
	Actor Actor `json:"actor"`
	Count int   `json:"count"`
}

// TaskCheckpoint names the latest checkpoint a task reached.
type TaskCheckpoint struct {
	ID string `json:"id"`
	// Name is the agent's name for a named checkpoint, or "step N" /
	// "turn N" for automatic ones (Kind step or turn).
	Name   string    `json:"name"`
	Kind   string    `json:"kind"`
	TurnID string    `json:"turn_id,omitempty"`
	Step   int       `json:"step,omitempty"`
	At     time.Time `json:"at"`
}

// TaskTotals sums a report's whole window. With IncludeSubagents, CostUSD,
// Usage and the series' cost add up each session's own usage, so that the
// cost a sub-agent rolled into its parent is not counted twice.
type TaskTotals struct {
	Tasks    int                   `json:"tasks"`
	ByStatus map[SessionStatus]int `json:"by_status"`
	Reviewed int                   `json:"reviewed"`
	Accepted int                   `json:"accepted"`
	Rejected int                   `json:"rejected"`
	// AcceptanceRate is Accepted / Reviewed (null when nothing was
	// reviewed).
	AcceptanceRate *float64 `json:"acceptance_rate"`
	// InputComplete counts the tasks that never asked for information.
	InputComplete int `json:"input_complete"`
	Asks          int `json:"asks"`
	// AsksPerTask is Asks / Tasks (null without tasks).
	AsksPerTask *float64 `json:"asks_per_task"`
	Retries     int      `json:"retries"`
	// CostUSD is what every task of the window cost, whatever became of
	// it. CostPerAcceptedTaskUSD is CostUSD / Accepted: failed, rejected
	// and unreviewed attempts cost money too, and an accepted result
	// carries them (null when nothing was accepted).
	CostUSD                float64  `json:"cost_usd"`
	CostPerAcceptedTaskUSD *float64 `json:"cost_per_accepted_task_usd"`
	// MonitorCostUSD is the part of CostUSD the model monitor cost.
	MonitorCostUSD float64 `json:"monitor_cost_usd"`
	Usage          Usage   `json:"usage"`
	// DecisionsByActor sums the tasks' DecisionsByActor (most first;
	// empty when nobody decided anything).
	DecisionsByActor []ActorCount `json:"decisions_by_actor"`
	// Policies has, per policy rule that asked for an approval in the
	// window's tasks, how often it asked and how people decided: approval
	// fatigue, measured (most asks first; empty when no rule asked).
	Policies []PolicyApprovals `json:"policies"`
}

// PolicyApprovals is how one policy rule's approvals went across a
// report's tasks.
type PolicyApprovals struct {
	// Rule is the rule's name (Action.Policy).
	Rule string `json:"rule"`
	// Asks counts the approvals it asked for; Decided those decided
	// (approved, rejected, expired or stopped by a cancel); Approved those
	// approved, edited or not.
	Asks     int `json:"asks"`
	Decided  int `json:"decided"`
	Approved int `json:"approved"`
	// ApproveRate is Approved / Decided (null when none was decided).
	ApproveRate *float64 `json:"approve_rate"`
	// MedianDecideSeconds is the median time from an approval's request to
	// its decision (null when none was decided). A task keeps the first
	// 256 decision times of a rule.
	MedianDecideSeconds *float64 `json:"median_decide_seconds"`
	// Relax flags a rule approved every time it asked, at least the
	// report's relax_after_asks times: a candidate to relax (to allow, or
	// to ask on narrower conditions), since asking costs attention.
	Relax bool `json:"relax"`
	// Tighten flags a rule the trajectory monitor flagged in the window's
	// tasks, with its reason: a candidate to tighten.
	Tighten       bool   `json:"tighten"`
	TightenReason string `json:"tighten_reason,omitempty"`
}

// DefaultRelaxAfterAsks is how many asks, all approved, flag a rule as a
// candidate to relax when the server is not told otherwise.
const DefaultRelaxAfterAsks = 20

// TaskBucket is one hour or day of a report's series.
type TaskBucket struct {
	Start    time.Time `json:"start"`
	Tasks    int       `json:"tasks"`
	Reviewed int       `json:"reviewed"`
	Accepted int       `json:"accepted"`
	CostUSD  float64   `json:"cost_usd"`
}
