package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Provider answers one model call. Respond returns a complete response or an
// error; a partial response is never returned as complete (a stream cut
// midway is an error, and the call is retried as a whole).
type Provider interface {
	Respond(ctx context.Context, req *Request) (*Response, error)
}

// Endpoint is implemented by providers that call a remote API.
// DefaultBaseURL is where the calls of spec go when it gives no base_url
// ("": nowhere, the spec must give one). The engine sends a model key only
// to the host of the URL a spec's calls go to, and only when that host is
// one the key is bound to; a provider that does not implement Endpoint is
// given a key only for a spec with a base_url.
type Endpoint interface {
	DefaultBaseURL(spec lt.ModelSpec) string
}

// Role of a message in the context.
type Role string

// Roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one item of the context.
type Message struct {
	Role Role   `json:"role"`
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// CallID and IsError are set on tool results (Role tool).
	CallID  string `json:"call_id,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// Reasoning is an assistant message's reasoning as its provider
	// returned it; providers that need it back (Anthropic thinking blocks
	// in a tool loop, OpenAI reasoning items) send it on later calls.
	Reasoning *Reasoning `json:"reasoning,omitempty"`
}

// Reasoning is a model's reasoning for one response (see lt.Reasoning).
type Reasoning = lt.Reasoning

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolDef describes a tool to the model.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	Spec     lt.ModelSpec
	Messages []Message
	Tools    []ToolDef
	// Position is the number of model calls of this session that completed
	// (responded or failed) before this one, derived from the journal. The
	// scripted provider plays step Position, so a resume replays exactly.
	Position int
	// APIKey is the credential the engine resolved for Spec (from the
	// server's environment variable Spec.APIKeyEnv). Providers never read
	// the environment themselves, and never put the key in an error.
	APIKey string
	// OnDelta, when set, receives streamed output as it arrives. Providers
	// that stream call it from the goroutine that called Respond; a delta is
	// never a promise (only the returned Response is complete).
	OnDelta func(Delta)
}

// Delta is a piece of a streamed response.
type Delta struct {
	Text      string
	Reasoning string
}

// Response is a complete model answer.
type Response struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Reasoning *Reasoning `json:"reasoning,omitempty"`
	// Usage counts tokens as lt.Usage defines them: CachedInputTokens are
	// part of InputTokens, ReasoningTokens part of OutputTokens.
	Usage   lt.Usage `json:"usage"`
	CostUSD float64  `json:"cost_usd"`
	// Model is the model that answered, as the provider named it.
	Model string `json:"model,omitempty"`
	// StopReason is the provider's reason for ending the response
	// (end_turn, tool_use, max_tokens, ...), for the record.
	StopReason string `json:"stop_reason,omitempty"`
}

// ErrorKind classifies a failed call for the retry policy.
type ErrorKind string

// Error kinds.
const (
	KindRateLimited    ErrorKind = "rate_limited"
	KindOverloaded     ErrorKind = "overloaded"
	KindTimeout        ErrorKind = "timeout"
	KindServer         ErrorKind = "server_error"
	KindAuth           ErrorKind = "auth"
	KindBadRequest     ErrorKind = "bad_request"
	KindContextTooLong ErrorKind = "context_length_exceeded"
)

// Error is a classified provider error.
type Error struct {
	Kind       ErrorKind
	Status     int
	RetryAfter time.Duration
	Message    string
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("model %s (status %d): %s", e.Kind, e.Status, e.Message)
	}
	return fmt.Sprintf("model %s: %s", e.Kind, e.Message)
}

// Retryable reports whether calling again may succeed.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindRateLimited, KindOverloaded, KindTimeout, KindServer:
		return true
	}
	return false
}

// AsError returns the classified error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var me *Error
	ok := errors.As(err, &me)
	return me, ok
}

// KindForStatus classifies an HTTP status the way providers use them.
func KindForStatus(status int) ErrorKind {
	switch {
	case status == 429:
		return KindRateLimited
	case status == 529 || status == 503:
		return KindOverloaded
	case status == 408 || status == 504:
		return KindTimeout
	case status == 401 || status == 403:
		return KindAuth
	case status >= 500:
		return KindServer
	default:
		return KindBadRequest
	}
}

// authCodes are the error codes and types, across the providers, of a
// credential the provider refuses: waiting or retrying does not cure them.
// An API reports them as an HTTP 401/403 before a stream begins, but some
// gateways and compatible servers report them inside a stream that began
// with 200, where they would otherwise read as a server error and be
// retried.
var authCodes = map[string]bool{
	"invalid_api_key":        true, // OpenAI
	"incorrect_api_key":      true,
	"invalid_authentication": true,
	"authentication_error":   true, // Anthropic, LiteLLM
	"permission_error":       true, // Anthropic
	"permission_denied":      true,
	"unauthorized":           true,
	"account_deactivated":    true,
	"insufficient_quota":     true, // out of credit: not cured by waiting either
}

// IsAuthCode reports whether a provider's error code or type (as reported
// in an error body or a stream's error event) says the credential is
// refused.
func IsAuthCode(code string) bool { return authCodes[strings.ToLower(code)] }

// SpecValidator is implemented by providers that can check a model spec when
// an agent is defined, so a bad definition is refused up front.
type SpecValidator interface {
	ValidateSpec(spec lt.ModelSpec) error
}

// FieldError is a problem with one field of a model spec. Field is relative to
// the spec's "model" object, e.g. "script[2].tool_calls[0].name".
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
