package journal

import (
	"encoding/json"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// MCPToolsListed is the data of mcp.tools_listed: the tools an MCP server
// offered, as the model sees them from this event on. The engine builds the
// model's tool definitions from the latest such event of each server, never
// from a live listing, so a resumed session offers exactly what the journal
// says it offered.
type MCPToolsListed struct {
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
	Effect     lt.EffectClass `json:"effect"`
	EffectFrom string         `json:"effect_from"`
}

// MCPHiddenTool is a tool of an MCP server that the model is not offered.
type MCPHiddenTool struct {
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

// MCPServerLost is the data of mcp.server_lost: the server died, or its
// connection broke, while a call to it ran, so the call's outcome is
// unknown. The effect rules decide what happens to the call.
type MCPServerLost struct {
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
