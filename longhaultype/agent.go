package longhaultype

import (
	"encoding/json"
	"strings"
	"time"
)

// AgentSpec is a definition of an agent: model, instructions, tools, policies,
// default budget and environment. It is what `agent_spec` holds inline and what
// a configured agent's version stores.
type AgentSpec struct {
	Model        ModelSpec    `json:"model"`
	Instructions string       `json:"instructions,omitempty"`
	Tools        []ToolSpec   `json:"tools,omitempty"`
	Policies     []Policy     `json:"policies,omitempty"`
	Budget       *Budget      `json:"budget,omitempty"`
	Environment  *Environment `json:"environment,omitempty"`
	// Retry is the retry policy for transient model and tool failures.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// Compaction configures context compaction (default: at 70 % of the
	// model's context window).
	Compaction *Compaction `json:"compaction,omitempty"`
	// VerifyAcceptance configures the check of a final answer against the
	// session's acceptance criteria (on whenever the session has some).
	VerifyAcceptance *VerifyAcceptance `json:"verify_acceptance,omitempty"`
	// Subagents bounds the sub-agents a session of this agent spawns.
	Subagents *SubagentLimits `json:"subagents,omitempty"`
	// Monitor configures the trajectory monitor's built-in detectors (on
	// by default, each with its default action).
	Monitor *MonitorSpec `json:"monitor,omitempty"`

	// Stop conditions: each ends the turn with its own stop_reason.

	// MaxSteps bounds the steps of one turn (default 100) so a looping model
	// cannot run forever even without a budget (stop_reason max_steps).
	MaxSteps int `json:"max_steps,omitempty"`
	// MaxConsecutiveToolErrors ends the turn when that many tool calls in a
	// row fail (default 10; stop_reason tool_errors).
	MaxConsecutiveToolErrors int `json:"max_consecutive_tool_errors,omitempty"`
	// MaxRepeatedCalls ends the turn, before running it, when the model asks
	// for the same tool with the same arguments that many times in a row
	// (default 5; stop_reason loop_detected).
	MaxRepeatedCalls int `json:"max_repeated_calls,omitempty"`
	// TurnTimeoutSeconds ends a turn that has run that long, counted from
	// its start (0: none; stop_reason timeout).
	TurnTimeoutSeconds int64 `json:"turn_timeout_seconds,omitempty"`
}

// MonitorSpec configures the trajectory monitor of an agent's sessions.
type MonitorSpec struct {
	// Detectors sets, by detector name, what its findings do; a detector
	// not listed keeps its default (see MonitorDefaultAction).
	Detectors map[string]MonitorDetectorSpec `json:"detectors,omitempty"`
	// Model is the model monitor: a second model that reads a summary of
	// the session tree's trajectory and answers ok, warn or pause (nil:
	// none; only the detectors watch).
	Model *ModelSpec `json:"model,omitempty"`
	// EverySteps has the model monitor review the trajectory every that
	// many steps of a turn (0: no periodic review).
	EverySteps int `json:"every_steps,omitempty"`
	// Before lists the effect classes (read, idempotent, irreversible)
	// whose calls the model monitor reviews before they run, once their
	// arguments are final.
	Before []EffectClass `json:"before,omitempty"`
}

// MonitorDetectorSpec is one detector's setting.
type MonitorDetectorSpec struct {
	// Action is log (journal the finding), ask (journal it and raise a
	// monitor action the session waits on) or stop (journal it and end
	// the turn, stop_reason policy_violation); "" keeps the default.
	Action string `json:"action,omitempty"`
	// Off turns the detector off.
	Off bool `json:"off,omitempty"`
}

// Monitor actions.
const (
	MonitorLog  = "log"
	MonitorAsk  = "ask"
	MonitorStop = "stop"
)

// SubagentLimits bounds spawn_agent.
type SubagentLimits struct {
	// MaxParallel is how many children of one session run at once
	// (default 6); a spawn_agent call past it waits for one to finish.
	MaxParallel int `json:"max_parallel,omitempty"`
	// MaxDepth is how deep the tree of sessions may grow below the root
	// (default 3): a child at that depth cannot spawn.
	MaxDepth int `json:"max_depth,omitempty"`
}

// Environment is where an agent's tools run (DESIGN.md principles 2 and 8).
type Environment struct {
	// Network lists the hosts the sandbox and http_request may reach; none
	// by default.
	Network *NetworkSpec `json:"network,omitempty"`
	// Secrets names the vault secrets the agent may use: http_request
	// injects them into requests to their bound hosts. They never enter the
	// sandbox.
	Secrets []string `json:"secrets,omitempty"`
	// DiskMB is the workspace's disk quota in MiB: a shell command that
	// leaves the workspace above it fails with a tool error (0: the
	// server's default, serve --sandbox-disk-mb).
	DiskMB int `json:"disk_mb,omitempty"`
	// Runner runs the environment on a self-managed runner (longhaul
	// runner) of the session's project rather than on the server: the one
	// named, or one with all the labels. Absent: on the server's node.
	Runner *RunnerSelector `json:"runner,omitempty"`
	// IdleStopSeconds stops the session's environment (its workspace,
	// sandbox and proxy, on the server's node or on a runner) once the
	// session has been parked that long (waiting, requires_action, idle),
	// freeing it; the next call that needs it recreates it from the
	// snapshot taken when it stopped. 0: never stopped.
	IdleStopSeconds int `json:"idle_stop_seconds,omitempty"`
	// Browser configures what the browser tool's pages may load.
	Browser *BrowserSpec `json:"browser,omitempty"`
}

// BrowserSpec configures the browser tool. Which sites its pages are
// opened on is decided per site by a person (browser_permission actions),
// within environment.network.allow.
type BrowserSpec struct {
	// Subresources says what a page may load besides itself (scripts,
	// images, styles, frames, fetches): "same_origin" (the default: only
	// from the page's own site, so a page cannot pull a third-party
	// script, nor send what it reads to another site through an image's
	// address) or "allowed_hosts" (from any site of
	// environment.network.allow, without asking). Other requests fail in
	// the browser.
	Subresources string `json:"subresources,omitempty"`
}

// Browser subresource settings.
const (
	SubresourcesSameOrigin   = "same_origin"
	SubresourcesAllowedHosts = "allowed_hosts"
)

// RunnerSelector picks the runner a session's environment lives on:
// exactly one of Name and Labels.
type RunnerSelector struct {
	// Name is a runner's name (its --name).
	Name string `json:"name,omitempty"`
	// Labels are labels a runner must all have (its --label flags).
	Labels []string `json:"labels,omitempty"`
}

// String says which runner s asks for, as errors and actions name it:
// "box1" or "labels gpu,linux".
func (s *RunnerSelector) String() string {
	if s == nil {
		return ""
	}
	if s.Name != "" {
		return s.Name
	}
	return "labels " + strings.Join(s.Labels, ",")
}

// NetworkSpec is an agent's network allowlist.
type NetworkSpec struct {
	// Allow lists host names ("api.example.com"), subdomain patterns
	// ("*.example.com") and IP literals. Private, loopback, link-local and
	// metadata addresses are refused unless listed literally.
	Allow []string `json:"allow,omitempty"`
	// Ports are the destination ports allowed (default 80 and 443).
	Ports []int `json:"ports,omitempty"`
}

// Compaction configures when older conversation items are summarised. The
// pinned block (instructions, goal, constraints, acceptance criteria) is
// never summarised.
type Compaction struct {
	// Threshold is the share of the model's context window (0 < t < 1) the
	// next context may fill before older items are summarised (default 0.7).
	Threshold float64 `json:"threshold,omitempty"`
	// Disabled turns compaction off (a context-length error then fails the
	// turn).
	Disabled bool `json:"disabled,omitempty"`
}

// VerifyAcceptance configures the acceptance check of final answers.
type VerifyAcceptance struct {
	// MaxAttempts is how many times unmet criteria send the agent back to
	// work before the turn completes with the verdict (default 2).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Disabled turns the check off.
	Disabled bool `json:"disabled,omitempty"`
}

// PolicyDecision is what a policy decides for a tool call.
type PolicyDecision string

// Policy decisions (DESIGN.md principle 4).
const (
	PolicyAllow PolicyDecision = "allow"
	PolicyAsk   PolicyDecision = "ask"
	PolicyDeny  PolicyDecision = "deny"
)

// Policy decides whether a tool call runs (allow), waits for a person's
// approval (ask) or is refused (deny). A policy matches a call when Tool
// names the call's tool (empty or "*": every tool; "docs__*": every tool
// whose name starts with "docs__", such as an MCP server's) and When, a CEL
// expression, is true (empty: always). Of all matching policies the most
// restrictive decides (deny over ask over allow); a call no policy matches
// is allowed. When sees `tool`, `args` (the call's arguments), `effects`
// (the session's earlier tool calls: tool, args, class, status, error,
// session_id, turn_id, step) and `usage`; `count(list, pred)`, `sum(list, expr)` and
// `last(list, pred)` iterate with the element named `e`.
type Policy struct {
	// Name identifies the rule in the journal and in approvals (default:
	// "policies[i]").
	Name     string         `json:"name,omitempty"`
	Tool     string         `json:"tool,omitempty"`
	When     string         `json:"when,omitempty"`
	Decision PolicyDecision `json:"decision"`
	// Reason is shown to the person asked, or returned to the model when
	// the call is denied.
	Reason string `json:"reason,omitempty"`
	// ExpiresInSeconds makes an approval this policy asks for expire: a
	// decision after that rejects the call (ask only; 0: never).
	ExpiresInSeconds int64 `json:"expires_in_seconds,omitempty"`
	// Approvers constrains who may decide the approvals this policy asks
	// for (ask only; nil: anyone whose role may decide actions).
	Approvers *Approvers `json:"approvers,omitempty"`
}

// Approvers is who may decide an approval: separation of duties. Every
// condition given must hold; a decision by anyone else is refused (403)
// and the approval stays pending.
type Approvers struct {
	// Roles the decider's key must have one of (admin, approver: the
	// roles that may decide actions at all).
	Roles []Role `json:"roles,omitempty"`
	// Names the decider's key must have one of.
	Names []string `json:"names,omitempty"`
	// NotCreator refuses the session's creator (Session.CreatedBy; for a
	// sub-agent, its root's creator): the key that started the work may
	// not approve it.
	NotCreator bool `json:"not_creator,omitempty"`
}

// RetryPolicy bounds retries of transient failures: model calls (timeouts,
// 429, 5xx, overload) and tool calls whose effect class allows re-running
// (read, idempotent; never irreversible). Backoff is exponential with jitter,
// and a provider's Retry-After wins when it is longer.
type RetryPolicy struct {
	// MaxAttempts per call, the first included (default 5).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// InitialBackoffMS is the wait before the second attempt (default 1000).
	InitialBackoffMS int64 `json:"initial_backoff_ms,omitempty"`
	// MaxBackoffMS caps one wait (default 60000).
	MaxBackoffMS int64 `json:"max_backoff_ms,omitempty"`
}

// ModelSpec selects and configures the model provider.
type ModelSpec struct {
	Provider        string          `json:"provider"`
	Name            string          `json:"name,omitempty"`
	BaseURL         string          `json:"base_url,omitempty"`
	APIKeyEnv       string          `json:"api_key_env,omitempty"`
	APIKeySecret    string          `json:"api_key_secret,omitempty"`
	API             string          `json:"api,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	MaxOutputTokens int             `json:"max_output_tokens,omitempty"`
	ContextWindow   int             `json:"context_window,omitempty"`
	Pricing         json.RawMessage `json:"pricing,omitempty"`
	// Script is the scripted provider's list of steps (API.md).
	Script json.RawMessage `json:"script,omitempty"`
}

// ToolSpec enables a tool for an agent: a built-in by name, an application
// function tool (Type "function") answered through a function_call action,
// or the tools of an MCP server (Type "mcp"; Name names the server, and the
// model sees each of its tools as "<name>__<tool>").
type ToolSpec struct {
	Name        string          `json:"name"`
	Type        string          `json:"type,omitempty"`
	Description string          `json:"description,omitempty"`
	Effect      EffectClass     `json:"effect,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	// TimeoutSeconds bounds one call of the tool (built-ins have defaults).
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// Affects names the arguments whose values say who or what a call
	// affects (e.g. ["to", "cc"]); approvals list them. Default: values
	// that look like e-mail addresses, URLs, paths or commands.
	Affects []string `json:"affects,omitempty"`

	// MCP servers (Type "mcp") only.

	// Command, with Args, starts a stdio server in the session's sandbox,
	// in its workspace; Env adds environment variables (never secrets:
	// they would enter the sandbox).
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL is a streamable HTTP server, reached under the session's network
	// allowlist (environment.network).
	URL string `json:"url,omitempty"`
	// HeadersSecret names a vault secret injected into the requests to URL
	// (its header and format), when the secret is bound to URL's host.
	HeadersSecret string `json:"headers_secret,omitempty"`
	// Tools is an allowlist of the server's tool names (default: all).
	Tools []string `json:"tools,omitempty"`
	// Effects sets the effect class of the server's tools by their names
	// on the server ({"echo": "read"}); a tool it does not name is
	// irreversible unless TrustAnnotations.
	Effects map[string]EffectClass `json:"effects,omitempty"`
	// TrustAnnotations lets the server's tool annotations classify the
	// tools Effects does not name: readOnlyHint makes a tool read,
	// idempotentHint idempotent (default false: annotations are the
	// server's claims, not the operator's).
	TrustAnnotations bool `json:"trust_annotations,omitempty"`
}

// Agent is a named, versioned agent definition.
type Agent struct {
	// Project is the project the agent belongs to: agent names are unique
	// within a project.
	Project   string    `json:"project"`
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	Spec      AgentSpec `json:"spec"`
	CreatedAt time.Time `json:"created_at"`
	// CreatedBy is who defined this version (nil for versions defined
	// before actors were recorded).
	CreatedBy *Actor `json:"created_by,omitempty"`
}

// PutAgentRequest is the body of POST /v1/agents: it creates the agent or adds
// a new version of it.
type PutAgentRequest struct {
	Name string    `json:"name"`
	Spec AgentSpec `json:"spec"`
	// Project: only an admin key may name one (default DefaultProject);
	// another key's agents are in its own project.
	Project string `json:"project,omitempty"`
}

// Error is the body of every error response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// ErrorResponse wraps Error as the API returns it.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// Error codes and the HTTP statuses they go with.
const (
	CodeInvalidRequest  = "invalid_request"   // 400
	CodeUnauthorized    = "unauthorized"      // 401
	CodeForbidden       = "forbidden"         // 403
	CodeNotFound        = "not_found"         // 404
	CodeConflict        = "conflict"          // 409
	CodePayloadTooLarge = "payload_too_large" // 413
	CodeRateLimited     = "rate_limited"      // 429
	CodeInternal        = "internal"          // 500
	CodeUnavailable     = "unavailable"       // 503
	// CodeInsufficientStorage: the data volume is full (or below the
	// server's free-space floor); nothing of the request was kept.
	CodeInsufficientStorage = "insufficient_storage" // 507
)
