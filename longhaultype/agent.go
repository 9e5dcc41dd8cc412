package longhaultype

import (
	"encoding/json"
	"time"
)

// AgentSpec is a definition of an agent: model, instructions, tools, policies,
// default budget and environment. It is what `agent_spec` holds inline and what
// a configured agent's version stores.
type AgentSpec struct {
	Model        ModelSpec       `json:"model"`
	Instructions string          `json:"instructions,omitempty"`
	Tools        []ToolSpec      `json:"tools,omitempty"`
	Policies     json.RawMessage `json:"policies,omitempty"`
	Budget       *Budget         `json:"budget,omitempty"`
	Environment  json.RawMessage `json:"environment,omitempty"`
	// MaxSteps bounds the steps of one turn (default 100) so a looping model
	// cannot run forever even without a budget.
	MaxSteps int `json:"max_steps,omitempty"`
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

// ToolSpec enables a tool for an agent: a built-in by name, or an application
// function tool (Type "function") answered through a function_call action.
type ToolSpec struct {
	Name        string          `json:"name"`
	Type        string          `json:"type,omitempty"`
	Description string          `json:"description,omitempty"`
	Effect      EffectClass     `json:"effect,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	// TimeoutSeconds bounds one call of the tool (built-ins have defaults).
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// Agent is a named, versioned agent definition.
type Agent struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	Spec      AgentSpec `json:"spec"`
	CreatedAt time.Time `json:"created_at"`
}

// PutAgentRequest is the body of POST /v1/agents: it creates the agent or adds
// a new version of it.
type PutAgentRequest struct {
	Name string    `json:"name"`
	Spec AgentSpec `json:"spec"`
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
)
