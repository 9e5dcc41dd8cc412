package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// callModel checks the budget, journals the request, calls the model and
// journals its complete answer with the tool calls it asked for. A crash
// before the answer is durable means "call again": nothing half-done is kept.
func (r *runner) callModel(ctx context.Context) error {
	st := r.st
	turn := st.CurrentTurn()
	if ok, err := r.checkStop(); !ok || err != nil {
		return err
	}
	if ok, err := r.checkBudget(false); !ok || err != nil {
		return err
	}
	stepN := 1
	if st.Step != nil {
		stepN = st.Step.N + 1
	}
	maxSteps := r.spec.MaxSteps
	if maxSteps == 0 {
		maxSteps = r.e.cfg.MaxStepsPerTurn
	}
	if stepN > maxSteps {
		return r.failTurn(lt.StopMaxSteps, fmt.Sprintf("the turn reached its limit of %d steps", maxSteps))
	}
	if r.provider == nil {
		return r.failTurn(lt.StopProviderError, fmt.Sprintf("model provider %q is not configured on this server", r.spec.Model.Provider))
	}
	pos, attempt := st.ModelPosition, st.ModelAttempt+1
	if err := r.add(lt.EventModelRequested, turn.ID, stepN, journal.ModelRequested{
		Step: stepN, Position: pos, Attempt: attempt, Provider: r.spec.Model.Provider, Model: r.spec.Model.Name,
	}); err != nil {
		return err
	}
	if err := r.flush(ctx, false); err != nil {
		return err
	}
	timeout := r.e.cfg.ModelTimeout
	if left, ok := r.turnTimeLeft(); ok {
		timeout = min(timeout, left)
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	start := r.e.clock.Now()
	resp, err := r.provider.Respond(callCtx, &model.Request{Spec: r.spec.Model, Messages: r.tx.messages(), Tools: r.toolDefs, Position: pos})
	cancel()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	dur := r.e.clock.Now().Sub(start).Milliseconds()
	if err != nil {
		return r.modelFailed(ctx, stepN, pos, attempt, dur, err)
	}
	calls := make([]journal.ToolCall, len(resp.ToolCalls))
	for i, tc := range resp.ToolCalls {
		args := tc.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		calls[i] = journal.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: args}
	}
	usage := resp.Usage
	usage.CostUSD, usage.ModelCalls, usage.ToolCalls = resp.CostUSD, 1, 0
	if err := r.add(lt.EventModelResponded, turn.ID, stepN, journal.ModelResponded{
		Step: stepN, Position: pos, Text: resp.Text, ToolCalls: calls, Usage: usage, CostUSD: resp.CostUSD, DurationMS: dur,
	}); err != nil {
		return err
	}
	for i, tc := range calls {
		if err := r.requestCall(turn.ID, stepN, i, tc); err != nil {
			return err
		}
	}
	return nil
}

// requestCall journals one call the model asked for, resolving its kind and
// effect class; a call to an unknown tool or with invalid arguments fails at
// once with an error the model can read.
func (r *runner) requestCall(turnID string, step, index int, tc journal.ToolCall) error {
	if tc.ID == "" {
		tc.ID = fmt.Sprintf("call_%d_%d", step, index)
	}
	req := journal.ToolRequested{Step: step, Index: index, CallID: tc.ID, Tool: tc.Name, Arguments: tc.Arguments}
	var problem string
	spec, enabled := r.toolSpec(tc.Name)
	canon, err := tool.CanonicalJSON(tc.Arguments)
	if err != nil {
		problem = "arguments are not valid JSON: " + err.Error()
		req.Kind = journal.CallInvalid
	} else {
		req.Arguments = canon
		req.ArgumentsSHA256, _ = tool.ArgumentsSHA256(canon)
	}
	if problem == "" {
		switch {
		case !enabled:
			req.Kind, problem = journal.CallInvalid, fmt.Sprintf("unknown tool %q", tc.Name)
		case spec.Type == "function":
			req.Kind, req.Class = journal.CallFunction, lt.EffectIrreversible
			if len(spec.Parameters) > 0 {
				if err := tool.ValidateArguments(spec.Parameters, canon); err != nil {
					req.Kind, problem = journal.CallInvalid, err.Error()
				}
			}
		case engineTools[tc.Name].kind != "":
			et := engineTools[tc.Name]
			req.Kind, req.Class = et.kind, lt.EffectRead
			if err := tool.ValidateArguments(et.schema, canon); err != nil {
				req.Kind, problem = journal.CallInvalid, err.Error()
			}
		default:
			t, _ := r.e.tools.Get(tc.Name)
			req.Kind, req.Class = journal.CallBuiltin, t.Effect()
			if err := tool.ValidateArguments(t.Parameters(), canon); err != nil {
				req.Kind, problem = journal.CallInvalid, err.Error()
			}
		}
		if spec.Effect != "" && req.Kind != journal.CallInvalid {
			req.Class = spec.Effect
		}
	}
	if err := r.add(lt.EventToolRequested, turnID, step, req); err != nil {
		return err
	}
	if problem == "" {
		return nil
	}
	return r.add(lt.EventToolFailed, turnID, step, journal.ToolFailed{Step: step, Index: index, CallID: tc.ID, Tool: tc.Name, Error: problem})
}

func (r *runner) toolSpec(name string) (lt.ToolSpec, bool) {
	for _, t := range r.spec.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return lt.ToolSpec{}, false
}

// modelFailed journals a failed call and applies the retry policy: transient
// errors are retried with backoff (honouring Retry-After), others end the turn.
func (r *runner) modelFailed(ctx context.Context, step, pos, attempt int, dur int64, err error) error {
	me, ok := model.AsError(err)
	if !ok {
		me = &model.Error{Kind: model.KindServer, Message: err.Error()}
	}
	turn := r.st.CurrentTurn()
	left, hasTimeout := r.turnTimeLeft()
	outOfTime := hasTimeout && left <= 0
	if outOfTime && errors.Is(err, context.DeadlineExceeded) {
		me = &model.Error{Kind: model.KindTimeout, Message: "the model call ran into the turn's timeout"}
	}
	retry := me.Retryable() && attempt < r.maxAttempts() && !outOfTime
	var wait time.Duration
	if retry {
		wait = r.backoff(attempt, me.RetryAfter, fmt.Sprintf("model/%d", step))
	}
	if err := r.add(lt.EventModelFailed, turn.ID, step, journal.ModelFailed{
		Step: step, Position: pos, Attempt: attempt, Kind: string(me.Kind), Status: me.Status,
		RetryAfterMS: me.RetryAfter.Milliseconds(), Message: me.Message, Consumed: true, DurationMS: dur,
		Retry: retry, RetryInMS: wait.Milliseconds(),
	}); err != nil {
		return err
	}
	if outOfTime {
		_, err := r.checkStop()
		return err
	}
	if !me.Retryable() {
		return r.failTurn(lt.StopProviderError, me.Error())
	}
	if !retry {
		return r.failTurn(lt.StopRetriesExhausted, fmt.Sprintf("model call failed %d times; last: %s", attempt, me.Error()))
	}
	return r.backOff(ctx, wait)
}
