package longhaul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ToolCall describes one call of a Go tool (or of its reconcile probe).
type ToolCall struct {
	// SessionID is the session whose agent made the call.
	SessionID string
	// IdempotencyKey is derived from the session, turn, step and call
	// index: every attempt of this call carries the same key, including
	// the run after a crash, and the reconcile probe gets the key of the
	// attempt whose outcome is unknown. Pass it to the service the tool
	// calls, or record it with the effect, so a repeat can be recognised.
	IdempotencyKey string
	// Workspace is the absolute path of the session's workspace directory
	// (shared with its sub-agents); empty for a tool made WithoutWorkspace.
	Workspace string
	// Effect is the effect class the engine decided for this call: the
	// tool's, or the agent's override of it.
	Effect lt.EffectClass
}

// GoTool is a tool written in Go, made with Tool. Give it to Options.Tools;
// agents enable it by name, like a built-in ({"name": "charge_card"}, or
// GoTool.Spec).
type GoTool struct {
	name   string
	effect lt.EffectClass
	impl   tool.Tool
}

// Name is the tool's name, as agents and policies name it.
func (t *GoTool) Name() string { return t.name }

// Spec is the agent's tools entry that enables the tool.
func (t *GoTool) Spec() lt.ToolSpec { return lt.ToolSpec{Name: t.name} }

// Parameters is the JSON schema of the tool's arguments, derived from its
// input type: what the model is shown, and what its arguments are checked
// against before the tool runs.
func (t *GoTool) Parameters() json.RawMessage { return t.impl.Parameters() }

// Effect is the tool's effect class (an agent may override it).
func (t *GoTool) Effect() lt.EffectClass { return t.effect }

// ToolOption configures a GoTool; see WithReconcile.
type ToolOption[In, Out any] func(*toolConfig[In, Out])

type toolConfig[In, Out any] struct {
	probe       func(ctx context.Context, call ToolCall, in In) (happened bool, out Out, err error)
	noWorkspace bool
}

// WithoutWorkspace says the tool never reads or writes the session's
// workspace (it calls a service, or computes): its calls get no
// ToolCall.Workspace, and the engine need not treat them as changing the
// workspace behind its back (which makes the next checkpoint walk the
// workspace, and, for a session whose workspace is still empty, costs
// a file beside it).
func WithoutWorkspace[In, Out any]() ToolOption[In, Out] {
	return func(c *toolConfig[In, Out]) { c.noWorkspace = true }
}

// WithReconcile gives an irreversible tool a reconcile probe: when a worker
// dies while the tool runs, the journal holds that the call started but not
// how it ended. Instead of asking a person (an in_doubt required action),
// the engine first calls probe with the same arguments and idempotency key.
// If the probe finds the effect (happened), the call completes with out as
// its result and its effect is resolved as "reconciled"; if it finds none,
// the call runs again with the same key. If probe returns an error, the
// in_doubt action is raised as without a probe, the error shown as
// evidence. A probe must only look, never act; it runs under the timeout of
// the agent's tool entry (timeout_seconds), or a minute.
//
// The engine asks the probe only for calls whose effect class is
// irreversible: read and idempotent calls are simply run again.
func WithReconcile[In, Out any](probe func(ctx context.Context, call ToolCall, in In) (happened bool, out Out, err error)) ToolOption[In, Out] {
	return func(c *toolConfig[In, Out]) { c.probe = probe }
}

// toolNamePattern is the engine's rule for tool names (what every model
// provider accepts).
var toolNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// Tool makes a tool from a typed Go function. The JSON schema of its
// arguments is derived from In (a struct: its exported fields by their
// json names, required unless tagged omitempty or omitzero, a field's
// `jsonschema:"..."` tag its description); the model's arguments are
// checked against it and decoded into In before fn runs. fn's Out is
// marshalled to JSON as the call's result; an error is the call's error,
// returned to the model (wrap it with Transient to have a read or
// idempotent call retried with backoff instead). fn must return when ctx
// ends (the call's timeout, the runtime's Close, or a lost lease): the
// engine then treats the call as cut off by a crash.
//
// effect says what running the tool again does (DESIGN.md principle 3):
// lt.EffectRead (nothing outside), lt.EffectIdempotent (the effect is
// keyed by call.IdempotencyKey) or lt.EffectIrreversible (then see
// WithReconcile). An agent may override it in its tools entry.
//
// Tool panics when the name is not a valid tool name (a letter, then up to
// 63 letters, digits, '_' or '-') or is one the engine runs itself, when
// effect is not a known class, when fn is nil, or when no JSON schema can
// be derived from In: these are programming errors, found at start.
func Tool[In, Out any](name, description string, effect lt.EffectClass, fn func(ctx context.Context, call ToolCall, in In) (Out, error), opts ...ToolOption[In, Out]) *GoTool {
	if !toolNamePattern.MatchString(name) {
		panic(fmt.Sprintf("longhaul: tool name %q must match %s", name, toolNamePattern))
	}
	if engine.ReservedToolName(name) {
		panic(fmt.Sprintf("longhaul: tool name %q is a tool the engine runs itself", name))
	}
	if !effect.Valid() {
		panic(fmt.Sprintf("longhaul: tool %s: effect %q must be read, idempotent or irreversible", name, effect))
	}
	if fn == nil {
		panic(fmt.Sprintf("longhaul: tool %s: fn is nil", name))
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("longhaul: tool %s: derive the JSON schema of its input: %v", name, err))
	}
	params, err := inputSchema(schema)
	if err != nil {
		panic(fmt.Sprintf("longhaul: tool %s: %v", name, err))
	}
	var cfg toolConfig[In, Out]
	for _, o := range opts {
		o(&cfg)
	}
	t := &goTool[In, Out]{name: name, description: description, effect: effect, params: params, fn: fn, noWorkspace: cfg.noWorkspace}
	var impl tool.Tool = t
	if cfg.probe != nil {
		impl = &reconcilingTool[In, Out]{goTool: t, probe: cfg.probe}
	}
	return &GoTool{name: name, effect: effect, impl: impl}
}

// inputSchema checks that a schema derived from a tool's or a function's
// input describes an object (a model's arguments are always one) and
// returns it encoded.
func inputSchema(schema *jsonschema.Schema) (json.RawMessage, error) {
	if schema.Type != "object" && !slices.Contains(schema.Types, "object") {
		return nil, errors.New("its input must be a struct or a map with string keys: tool arguments are a JSON object")
	}
	params, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("encode the JSON schema of its input: %w", err)
	}
	if err := tool.CompileSchema(params); err != nil {
		return nil, fmt.Errorf("the JSON schema derived from its input does not compile: %w", err)
	}
	return params, nil
}

// TransientError is an error of a call that may succeed if tried again (a
// timeout, a rate limit, a 5xx of the service the tool calls). Wrap such
// errors with Transient.
type TransientError struct {
	Err error
	// RetryAfter is how long the service asked to wait (0: the agent's
	// backoff decides).
	RetryAfter time.Duration
}

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Transient marks err as transient: the engine retries a read or
// idempotent call with backoff (and the same idempotency key), up to the
// agent's retry limit, instead of returning the error to the model. An
// irreversible call is never retried: the model gets the error.
func Transient(err error, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err, RetryAfter: retryAfter}
}

// goTool adapts a typed function to the engine's tool.Tool.
type goTool[In, Out any] struct {
	name, description string
	effect            lt.EffectClass
	params            json.RawMessage
	fn                func(ctx context.Context, call ToolCall, in In) (Out, error)
	noWorkspace       bool
}

func (t *goTool[In, Out]) Name() string                { return t.name }
func (t *goTool[In, Out]) WorkspaceFree() bool         { return t.noWorkspace }
func (t *goTool[In, Out]) Description() string         { return t.description }
func (t *goTool[In, Out]) Parameters() json.RawMessage { return t.params }
func (t *goTool[In, Out]) Effect() lt.EffectClass      { return t.effect }

// prepare decodes the arguments and bounds ctx by the call's timeout.
func (t *goTool[In, Out]) prepare(ctx context.Context, call *tool.Call) (context.Context, context.CancelFunc, ToolCall, In, error) {
	var in In
	tc := ToolCall{SessionID: call.SessionID, IdempotencyKey: call.IdempotencyKey, Workspace: call.Workspace, Effect: call.Effect}
	if tc.Effect == "" {
		tc.Effect = t.effect
	}
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return ctx, func() {}, tc, in, fmt.Errorf("decode the arguments of %s: %w", t.name, err)
	}
	if call.Timeout > 0 {
		ctx, cancel := context.WithTimeout(ctx, call.Timeout)
		return ctx, cancel, tc, in, nil
	}
	return ctx, func() {}, tc, in, nil
}

func (t *goTool[In, Out]) Run(ctx context.Context, call *tool.Call) (res *tool.Result, err error) {
	ctx, cancel, tc, in, err := t.prepare(ctx, call)
	defer cancel()
	if err != nil {
		return &tool.Result{Error: err.Error()}, nil
	}
	defer func() {
		// A panic in the application's function must not take the
		// engine down; the call fails (for an irreversible tool, whoever
		// reads the ledger sees it failed, not that it never ran).
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("tool %s panicked: %v", t.name, p)
		}
	}()
	out, ferr := t.fn(ctx, tc, in)
	if ferr != nil {
		r := &tool.Result{Error: ferr.Error()}
		var te *TransientError
		if errors.As(ferr, &te) {
			r.Transient, r.RetryAfter = true, te.RetryAfter
		}
		if r.Error == "" {
			r.Error = "the tool failed without a message"
		}
		return r, nil
	}
	return &tool.Result{Output: out}, nil
}

// reconcilingTool is a goTool with a reconcile probe (tool.Reconciler).
type reconcilingTool[In, Out any] struct {
	*goTool[In, Out]
	probe func(ctx context.Context, call ToolCall, in In) (bool, Out, error)
}

func (t *reconcilingTool[In, Out]) Reconcile(ctx context.Context, call *tool.Call) (rec *tool.Reconciliation, err error) {
	ctx, cancel, tc, in, err := t.prepare(ctx, call)
	defer cancel()
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("the reconcile probe of %s panicked: %v", t.name, p)
		}
	}()
	happened, out, err := t.probe(ctx, tc, in)
	if err != nil {
		return nil, err
	}
	if !happened {
		return &tool.Reconciliation{}, nil
	}
	return &tool.Reconciliation{Happened: true, Output: out}, nil
}
