package tool

import (
	"context"
	"encoding/json"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Tool is a callable tool.
type Tool interface {
	Name() string
	Description() string
	// Parameters is the JSON schema of the arguments object.
	Parameters() json.RawMessage
	// Effect is the default effect class; an agent may override it.
	Effect() lt.EffectClass
	// Run executes one call. A tool-level failure the model should see (bad
	// path, non-zero exit is NOT one: see shell) is returned as Result.Error;
	// a Go error means the tool could not run at all (it is reported to the
	// model as an error too, and logged).
	Run(ctx context.Context, call *Call) (*Result, error)
}

// Call is one invocation.
type Call struct {
	SessionID string
	// Workspace is the absolute path of the session's workspace directory.
	Workspace string
	Arguments json.RawMessage
	// IdempotencyKey is derived from (session, turn, step, call index): the
	// same on every attempt of this call.
	IdempotencyKey string
	// Timeout bounds the call (0: the tool's default).
	Timeout time.Duration
	// MaxOutputBytes bounds captured output (0: the tool's default).
	MaxOutputBytes int
}

// Result is what the model gets back: Output on success, Error otherwise.
type Result struct {
	Output any    `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// Transient marks an Error that may not happen again (a timeout, a
	// reset connection, a 429 or 5xx from a remote service): the engine
	// retries the call if its effect class allows it (never irreversible).
	Transient bool `json:"-"`
	// RetryAfter is how long the remote side asked to wait, if it said.
	RetryAfter time.Duration `json:"-"`
}

// Registry maps names to tools.
type Registry struct {
	tools map[string]Tool
}

// NewRegistry returns a registry holding tools. It panics on a duplicate name
// (a programmer error at registration).
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{tools: make(map[string]Tool)}
	for _, t := range tools {
		r.Register(t)
	}
	return r
}

// Register adds t; it panics if the name is taken.
func (r *Registry) Register(t Tool) {
	if _, dup := r.tools[t.Name()]; dup {
		panic("tool: duplicate tool name " + t.Name())
	}
	r.tools[t.Name()] = t
}

// Get returns the tool named name.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}
