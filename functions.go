package longhaul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// FunctionCall describes one call of an application function tool, handed
// to its GoFunction.
type FunctionCall struct {
	SessionID string
	TurnID    string
	// ActionID is the function_call action the handler's output decides.
	ActionID string
	// CallID is the model's id of the call.
	CallID string
	// Tool is the function's name.
	Tool string
	// IdempotencyKey is the same for every hand-over of this call: a
	// handler that has an external effect keys it with it, so that a
	// second hand-over (after a crash, or by another node) does not repeat
	// the effect.
	IdempotencyKey string
}

// GoFunction answers an application function tool in-process, made with
// Function. Give it to Options.Functions, and enable the function in an
// agent with GoFunction.Spec.
//
// A function tool is not run by the engine: its calls become function_call
// required actions, which any application may answer through the API. A
// Runtime hands every pending function_call action whose tool has a
// GoFunction to it and decides the action with what it returns. This is
// durable: a call pending when the process stopped is handed over again
// after the next Open, so a handler may see one call more than once (key
// its effects with FunctionCall.IdempotencyKey); a call whose action was
// decided is never handed over again.
type GoFunction struct {
	name string
	spec lt.ToolSpec
	// handle returns the call's output, or the error the model sees.
	handle func(ctx context.Context, call FunctionCall, args json.RawMessage) (json.RawMessage, error)
}

// Name is the function's name, as agents and policies name it.
func (f *GoFunction) Name() string { return f.name }

// Spec is the agent's tools entry that enables the function: type
// "function", with its description, effect class and the parameters'
// schema.
func (f *GoFunction) Spec() lt.ToolSpec { return f.spec }

// Function makes an application function from a typed Go function. The
// JSON schema of its parameters is derived from In as Tool derives it; the
// model's arguments are checked against it before the action is created.
// fn's Out, marshalled to JSON, is the call's output; an error is the
// call's error, returned to the model. fn must return when ctx ends:
// Runtime.Close cancels it and waits, and the call, left undecided, is
// handed over again at the next Open.
//
// Function panics when the name is not a valid tool name or is one the
// engine runs itself, when effect is not a known class, when fn is nil, or
// when no JSON schema can be derived from In.
func Function[In, Out any](name, description string, effect lt.EffectClass, fn func(ctx context.Context, call FunctionCall, in In) (Out, error)) *GoFunction {
	if !toolNamePattern.MatchString(name) {
		panic(fmt.Sprintf("longhaul: function name %q must match %s", name, toolNamePattern))
	}
	if engine.ReservedToolName(name) {
		panic(fmt.Sprintf("longhaul: function name %q is a tool the engine runs itself", name))
	}
	if !effect.Valid() {
		panic(fmt.Sprintf("longhaul: function %s: effect %q must be read, idempotent or irreversible", name, effect))
	}
	if fn == nil {
		panic(fmt.Sprintf("longhaul: function %s: fn is nil", name))
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("longhaul: function %s: derive the JSON schema of its input: %v", name, err))
	}
	params, err := inputSchema(schema)
	if err != nil {
		panic(fmt.Sprintf("longhaul: function %s: %v", name, err))
	}
	return &GoFunction{
		name: name,
		spec: lt.ToolSpec{Name: name, Type: "function", Description: description, Effect: effect, Parameters: params},
		handle: func(ctx context.Context, call FunctionCall, args json.RawMessage) (json.RawMessage, error) {
			var in In
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, fmt.Errorf("decode the arguments of %s: %w", name, err)
			}
			out, err := fn(ctx, call, in)
			if err != nil {
				return nil, err
			}
			raw, err := json.Marshal(out)
			if err != nil {
				return nil, fmt.Errorf("encode the output of %s: %w", name, err)
			}
			return raw, nil
		},
	}
}

// Dispatcher tuning: how often every pending function_call action is
// looked at again (store notifications are hints that a busy process may
// miss), and how many handlers run at once.
const (
	functionRescanInterval = 5 * time.Second
	maxFunctionHandlers    = 16
)

// dispatcher hands pending function_call actions to their GoFunctions and
// decides the actions with what they return.
type dispatcher struct {
	svc   app.Service
	notes store.Store // for Subscribe
	fns   map[string]*GoFunction
	log   *slog.Logger

	mu       sync.Mutex
	inflight map[string]bool // action ids being handled
	sem      chan struct{}
	wg       sync.WaitGroup
}

func newDispatcher(svc app.Service, notes store.Store, fns map[string]*GoFunction, log *slog.Logger) *dispatcher {
	return &dispatcher{svc: svc, notes: notes, fns: fns, log: log, inflight: make(map[string]bool), sem: make(chan struct{}, maxFunctionHandlers)}
}

// run hands over the actions pending now, then those that appear, until
// ctx ends; then it waits for the handlers that run.
func (d *dispatcher) run(ctx context.Context) {
	defer d.wg.Wait()
	// Subscribed before the first scan, so nothing appears unseen between.
	notes, stop := d.notes.Subscribe(ctx)
	defer stop()
	d.scanAll(ctx)
	t := time.NewTicker(functionRescanInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.scanAll(ctx)
		case n, ok := <-notes:
			if !ok {
				notes = nil // the rescans go on
				continue
			}
			dirty := map[string]bool{}
			for more := true; more; {
				if n.Kind == store.KindEvents {
					dirty[n.SessionID] = true
				}
				select {
				case n, more = <-notes:
				default:
					more = false
				}
			}
			for id := range dirty {
				d.scanSession(ctx, id)
			}
		}
	}
}

// scanAll hands over every pending function_call action of a function this
// runtime answers.
func (d *dispatcher) scanAll(ctx context.Context) {
	p := lt.ListActionsParams{Status: string(lt.ActionPending), Type: string(lt.ActionFunctionCall), Limit: client.MaxListLimit}
	for ctx.Err() == nil {
		page, err := d.svc.ListAllActions(asLibrary(ctx), p)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("list pending function calls", "err", err)
			}
			return
		}
		for _, a := range page.Data {
			d.dispatch(ctx, a)
		}
		if page.NextCursor == nil || len(page.Data) == 0 {
			return
		}
		p.Cursor = *page.NextCursor
	}
}

// scanSession hands over the pending function_call actions of one session
// whose journal grew.
func (d *dispatcher) scanSession(ctx context.Context, sessionID string) {
	actions, err := d.svc.ListActions(asLibrary(ctx), sessionID, lt.ActionPending)
	if err != nil {
		if ctx.Err() == nil && !client.IsNotFound(apiError(err)) {
			d.log.Error("list pending actions", "session", sessionID, "err", err)
		}
		return
	}
	for _, a := range actions.Data {
		if a.Type == lt.ActionFunctionCall {
			d.dispatch(ctx, a)
		}
	}
}

// dispatch hands a to its function in a goroutine of its own, unless it is
// already being handled or no function here answers it.
func (d *dispatcher) dispatch(ctx context.Context, a lt.Action) {
	fn, ok := d.fns[a.Tool]
	if !ok {
		return
	}
	d.mu.Lock()
	if d.inflight[a.ID] {
		d.mu.Unlock()
		return
	}
	d.inflight[a.ID] = true
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer func() {
			d.mu.Lock()
			delete(d.inflight, a.ID)
			d.mu.Unlock()
		}()
		select {
		case d.sem <- struct{}{}:
			defer func() { <-d.sem }()
		case <-ctx.Done():
			return
		}
		d.answer(ctx, fn, a)
	}()
}

// answer runs the function and decides the action with its output or
// error. When ctx ends first (the runtime closes) the action stays
// pending, to be handed over again.
func (d *dispatcher) answer(ctx context.Context, fn *GoFunction, a lt.Action) {
	call := FunctionCall{SessionID: a.SessionID, TurnID: a.TurnID, ActionID: a.ID, CallID: a.CallID, Tool: a.Tool, IdempotencyKey: a.IdempotencyKey}
	out, err := d.call(ctx, fn, call, a.Arguments)
	if ctx.Err() != nil {
		return
	}
	dec := &lt.Decision{Output: out}
	if err != nil {
		msg := err.Error()
		if msg == "" {
			msg = "the function failed without a message"
		}
		dec = &lt.Decision{Error: msg}
	}
	if _, err := d.svc.DecideAction(asLibrary(ctx), a.SessionID, a.ID, dec); err != nil {
		switch ae := apiError(err); {
		case ctx.Err() != nil:
		case client.IsConflict(ae) || client.IsNotFound(ae):
			// Decided meanwhile, by another node or through the API.
			d.log.Debug("function call decided elsewhere", "session", a.SessionID, "action", a.ID, "err", ae)
		default:
			// Still pending: the next scan hands it over again.
			d.log.Error("decide function call", "session", a.SessionID, "action", a.ID, "tool", a.Tool, "err", err)
		}
	}
}

// call runs fn, turning a panic into the call's error: a bug in one
// handler must not take the process down.
func (d *dispatcher) call(ctx context.Context, fn *GoFunction, call FunctionCall, args json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("function panicked", "tool", call.Tool, "session", call.SessionID, "action", call.ActionID, "panic", fmt.Sprint(p))
			out, err = nil, fmt.Errorf("function %s panicked: %v", call.Tool, p)
		}
	}()
	out, err = fn.handle(ctx, call, args)
	if err == nil && len(out) == 0 {
		err = errors.New("the function returned no output")
	}
	return out, err
}
