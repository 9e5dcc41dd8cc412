package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// callModel checks the stop conditions and the budget, compacts the context
// when it grew past its threshold, then calls the model for the next step and
// journals its complete answer with the tool calls it asked for. A crash
// before the answer is durable means "call again": nothing half-done is kept.
func (r *runner) callModel(ctx context.Context) error {
	st := r.st
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
	if ok, err := r.refreshMCPTools(ctx); !ok || err != nil {
		return err // the turn ended, or the next tick goes on
	}
	// The context carries every steering message journaled so far (by
	// another writer). When the tick took no look (lookDeferred), the
	// append of the model's request checks instead (invoke).
	if !r.lookDeferred {
		if err := r.readSteers(ctx, false); err != nil {
			return err
		}
	}
	if done, err := r.compactIfNeeded(ctx, stepN); done || err != nil {
		return err // the next tick checks again and calls the model
	}
	tools := r.tools.definitions()
	res, err := r.invoke(ctx, "", stepN, r.tx.messages(), tools, func(c model.Counter) int { return r.tx.contextTokens(c, tools) })
	if res == nil || err != nil {
		return err
	}
	resp := res.resp
	turn := r.st.CurrentTurn()
	calls := make([]lt.ToolCall, len(resp.ToolCalls))
	for i, tc := range resp.ToolCalls {
		args := tc.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		calls[i] = lt.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: args}
	}
	if err := r.add(lt.EventModelResponded, turn.ID, stepN, lt.ModelRespondedData{
		Step: stepN, Position: res.pos, Text: resp.Text, ToolCalls: calls, Usage: res.usage(), CostUSD: resp.CostUSD,
		DurationMS: res.durMS, Reasoning: resp.Reasoning, Model: resp.Model, StopReason: resp.StopReason,
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

// requestDurable makes a model call's request durable (a step's, a
// compaction's, a verification's, a review's) on the journal the runner
// last read or wrote only. When this tick took no look at the session
// (lookDeferred, a step's call), anything another writer appended since
// (a steer, a cancel, a pause) sends the runner back to its tick; else a
// pause or a cancel does (controlAmong), and other writes are merged and
// the request sent. Sent back, the request is dropped unsent, its
// reservation in the tree's budget given back, the rest of the batch (the
// last step's events) merged onto the newer journal, and the tick decides
// again on the journal just read: a cancel or a pause acts there, and a
// steer is in the context of the call the tick makes. Merged and sent,
// the call would start after a pause or a cancel that came before it was
// answered. events, blobs and sent are the batch's lengths and the
// transcript's steers sent before the request was added. It reports
// whether the request is durable.
func (r *runner) requestDurable(ctx context.Context, purpose string, events, blobs, sent int) (bool, error) {
	rule := dropStartOnControl
	if r.lookDeferred && purpose == "" {
		rule = dropStartOnWrite
	}
	r.lookDeferred = false
	durable, err := r.appendOrDrop(ctx, events, blobs, false, rule)
	if !durable && err == nil {
		r.modelCallEnded()
		r.tx.sent = sent
	}
	return durable, err
}

// callResult is a model call that answered.
type callResult struct {
	resp  *model.Response
	pos   int
	durMS int64
}

// usage is the call's usage as the journal records it (one model call).
func (c *callResult) usage() lt.Usage {
	u := c.resp.Usage
	u.CostUSD, u.ModelCalls, u.ToolCalls = c.resp.CostUSD, 1, 0
	return u
}

// invoke makes one model call for the loop (purpose "" for a step, or
// compaction, verification, monitor: the model monitor's call, made with
// its own model spec and script position, monitorreview.go). It journals the request durably, streams the
// answer into coalesced model.delta events, and returns the complete
// response. A failure is journaled and the retry policy applied: invoke
// then returns a nil result (the next tick tries again, or the turn ended).
// count, when not nil, counts msgs and tools for a counter as
// model.CountMessages does (the transcript's contextTokens, which remembers
// its items' counts); nil counts them.
func (r *runner) invoke(ctx context.Context, purpose string, stepN int, msgs []model.Message, tools []model.ToolDef, count func(model.Counter) int) (*callResult, error) {
	turnID := r.st.CurrentTurn().ID
	spec, provider, pos := r.spec.Model, r.provider, r.st.ModelPosition
	if purpose == lt.PurposeMonitor {
		spec, provider, pos = *r.spec.Monitor.Model, r.e.cfg.Providers[r.spec.Monitor.Model.Provider], r.st.MonitorPosition
	}
	attempt := r.st.NextModelAttempt(stepN, purpose)
	// A step's context ends with every steering message read in so far
	// (msgs was built just now): the call says how many, and a later one
	// sent with interrupt abandons it.
	due, steers := cancelDue, 0
	if purpose == "" {
		steers = r.tx.steerCount()
		due = steerDue(steers)
	}
	counter := model.CounterFor(spec.Provider, spec.Name)
	var contextTokens int
	if count != nil {
		contextTokens = count(counter)
	} else {
		contextTokens = model.CountMessages(counter, msgs, tools)
	}
	if ok, err := r.reserveModelCall(ctx, spec, purpose, pos, attempt, contextTokens); !ok || err != nil {
		return nil, err // the tree's budget is spent (the turn ended), or the call waits for the tree's calls in flight
	}
	events, blobs, sent := len(r.b.events), len(r.b.blobs), r.tx.sent
	if err := r.add(lt.EventModelRequested, turnID, stepN, lt.ModelRequestedData{
		Step: stepN, Position: pos, Attempt: attempt, Provider: spec.Provider, Model: spec.Name,
		Purpose: purpose, ContextTokens: contextTokens, Steers: steers,
	}); err != nil {
		return nil, err
	}
	// Durable only on the journal the runner read: a control answered
	// since comes before the call, which is not sent (requestDurable).
	if durable, err := r.requestDurable(ctx, purpose, events, blobs, sent); !durable || err != nil {
		return nil, err
	}
	// The turn's timeout and the wall-clock budget abandon the request in
	// flight (callContext); a verification call, whose budget is checked
	// only before it starts, only the turn's timeout.
	interruptible, release := r.controlledContext(ctx, purpose != lt.PurposeVerification, due)
	defer release()
	callCtx, cancel := context.WithTimeout(interruptible, r.e.cfg.ModelTimeout)
	defer cancel()
	// The sink writes the journal under the runner's context: an
	// interrupted call's deltas are still recorded.
	sink := &deltaSink{r: r, ctx: ctx, cancel: cancel, turnID: turnID, step: stepN, attempt: attempt, purpose: purpose, last: r.e.clock.Now()}
	key, err := r.modelAccess(callCtx, spec)
	if err != nil {
		// Nothing was sent: the key (or the base URL) is refused now. The
		// call's reservation in the tree's budget ends with it.
		r.modelCallEnded()
		return nil, r.modelFailed(ctx, purpose, stepN, pos, attempt, 0, err, nil)
	}
	req := &model.Request{Spec: spec, Messages: msgs, Tools: tools, Position: pos, APIKey: key, OnDelta: sink.add}
	start := r.e.clock.Now()
	var written requestSent
	resp, err := provider.Respond(httptrace.WithClientTrace(callCtx, written.trace()), req)
	r.modelCallEnded()
	if sink.err != nil {
		return nil, sink.err // the lease was lost, or a newer write conflicts
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	dur := r.e.clock.Now().Sub(start).Milliseconds()
	if cause := interruption(ctx, interruptible); cause != nil && err != nil {
		if err := sink.emit(false); err != nil { // what streamed before the cut stays visible
			return nil, err
		}
		return nil, r.modelInterrupted(ctx, cause, lt.ModelFailedData{
			Purpose: purpose, Step: stepN, Position: pos, Attempt: attempt, DurationMS: dur,
		}, abandonedUsage(spec, counter, resp, contextTokens, sink.streamed.String()))
	}
	if err != nil {
		return nil, r.modelFailed(ctx, purpose, stepN, pos, attempt, dur, err, failedUsage(spec, counter, resp, written.timedOut(callCtx, err), contextTokens, sink.streamed.String()))
	}
	if err := sink.emit(false); err != nil {
		return nil, err
	}
	if resp.Usage.InputTokens == 0 && resp.Usage.OutputTokens == 0 {
		// Some OpenAI-compatible servers report no usage: count it offline,
		// so token and cost budgets still bind.
		resp.Usage.InputTokens, resp.Usage.Estimated = int64(contextTokens), true
		resp.Usage.OutputTokens = int64(model.CountMessages(counter, []model.Message{{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}}, nil))
		resp.CostUSD = model.CostOf(spec, resp.Usage)
	}
	return &callResult{resp: resp, pos: pos, durMS: dur}, nil
}

// requestSent tells whether a model call's HTTP request was written whole
// to the provider (an httptrace hook on the call's context, which the
// providers' SDKs send their requests with). A call cut by a timeout after
// that was in the provider's hands, which bills what it worked on,
// whichever timeout cut it: the engine's own (ModelTimeout, seen on the
// call's context) or one of the HTTP client's, which the context does not
// see (the transport's wait for response headers, which fires first when a
// library user raises ModelTimeout past it, or the Client.Timeout of a
// client a library user passes a provider). One cut before it was written
// (still dialling a host that does not answer) was not.
type requestSent struct{ started, wrote atomic.Bool }

func (s *requestSent) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn: func(string) { s.started.Store(true) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				s.wrote.Store(true)
			}
		},
	}
}

// timedOut reports whether the call that failed with err was cut by a
// timeout once the provider had it: callCtx's deadline passed (for a
// provider that speaks HTTP, after its request was written; one that does
// not, the scripted one or a library user's, is taken to have it), or a
// timeout of the transport (no HTTP status: a 408 or a 504 is the
// provider's answer that it did not work on the call) cut it after its
// request was written.
func (s *requestSent) timedOut(callCtx context.Context, err error) bool {
	sent := s.wrote.Load() || !s.started.Load()
	if errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return sent
	}
	me, ok := model.AsError(err)
	return ok && me.Kind == model.KindTimeout && me.Status == 0 && s.wrote.Load()
}

// failedUsage is what a model call that failed counts besides itself: the
// usage the provider reported with its error, if any; else, for a call
// the provider worked on before it failed (a timeout cut it once it was
// sent, timedOut, or it streamed output and broke off), its input and
// what it streamed, counted offline and priced as the model is, since the
// provider bills them. A hostile model that answers at length until the
// timeout would otherwise spend for free, once per retry. A call refused
// before it was worked on (a rate limit, an error status, a 408 or a 504
// among them) counts nothing more (nil).
func failedUsage(spec lt.ModelSpec, counter model.Counter, resp *model.Response, timedOut bool, contextTokens int, streamed string) *lt.Usage {
	hasUsage := resp != nil && (resp.Usage.InputTokens > 0 || resp.Usage.OutputTokens > 0)
	if !hasUsage && !timedOut && streamed == "" {
		return nil
	}
	u := abandonedUsage(spec, counter, resp, contextTokens, streamed)
	return &u
}

// Streamed output is coalesced into model.delta events of at least
// deltaBytes, or whatever arrived in deltaEvery: a live view without one
// event per token.
const (
	deltaBytes = 512
	deltaEvery = 250 * time.Millisecond
)

// deltaSink receives a provider's streamed output (on the goroutine that
// called Respond) and journals it in coalesced model.delta events.
type deltaSink struct {
	r               *runner
	ctx             context.Context
	cancel          context.CancelFunc
	turnID, purpose string
	step, attempt   int
	text, reasoning strings.Builder
	// streamed is all the call's output so far (a failed call counts it:
	// failedUsage).
	streamed strings.Builder
	last     time.Time
	err      error
}

func (d *deltaSink) add(delta model.Delta) {
	if d.err != nil {
		return
	}
	d.text.WriteString(delta.Text)
	d.reasoning.WriteString(delta.Reasoning)
	d.streamed.WriteString(delta.Text)
	d.streamed.WriteString(delta.Reasoning)
	if d.text.Len()+d.reasoning.Len() < deltaBytes && d.r.e.clock.Now().Sub(d.last) < deltaEvery {
		return
	}
	if err := d.emit(true); err != nil {
		d.err = err
		d.cancel() // stop the call: its answer could not be recorded anyway
	}
}

// emit journals what arrived since the last delta; flush makes it visible to
// event streams at once (the answer itself is durable only at model.responded).
func (d *deltaSink) emit(flush bool) error {
	if d.text.Len() == 0 && d.reasoning.Len() == 0 {
		return nil
	}
	ev := lt.ModelDeltaData{Step: d.step, Attempt: d.attempt, Purpose: d.purpose, Text: d.text.String(), Reasoning: d.reasoning.String()}
	d.text.Reset()
	d.reasoning.Reset()
	d.last = d.r.e.clock.Now()
	if err := d.r.add(lt.EventModelDelta, d.turnID, d.step, ev); err != nil {
		return err
	}
	if !flush {
		return nil
	}
	return d.r.flush(d.ctx, false)
}

// callIDOf is the id the call at index of step's answer goes by: the
// provider's, or one made of its step and index when the provider gave
// none. The journal's events of the call and the transcript's copy of the
// answer both name it so, so that each call in a context has its result.
func callIDOf(id string, step, index int) string {
	if id == "" {
		return fmt.Sprintf("call_%d_%d", step, index)
	}
	return id
}

// requestCall journals one call the model asked for, resolving its kind and
// effect class; a call to an unknown tool or with invalid arguments fails at
// once with an error the model can read.
func (r *runner) requestCall(turnID string, step, index int, tc lt.ToolCall) error {
	tc.ID = callIDOf(tc.ID, step, index)
	req := lt.ToolRequestedData{Step: step, Index: index, CallID: tc.ID, Tool: tc.Name, Arguments: tc.Arguments}
	var problem string
	en, known := r.tools.lookup(tc.Name)
	if known && en.ns == nsMCP {
		req.Server = en.mcp.server
	}
	canon, canonErr := tool.CanonicalJSON(tc.Arguments)
	if canonErr != nil {
		problem = "arguments are not valid JSON: " + canonErr.Error()
		req.Kind = lt.CallInvalid
	} else {
		req.Arguments = canon
		req.ArgumentsSHA256 = tool.CanonicalSHA256(canon) // canon is canonical already
	}
	switch {
	case problem != "":
	case !known:
		req.Kind, problem = lt.CallInvalid, fmt.Sprintf("unknown tool %q", tc.Name)
	default:
		req.Kind, req.Class = en.kind, en.classOf(canon)
		if !en.checksArgs() {
			break
		}
		if err := tool.ValidateArguments(en.schema, canon); err != nil {
			// Journaled with the tool's own class: the agent's override
			// applies only to a call that can run.
			req.Kind, req.Class, problem = lt.CallInvalid, en.class, err.Error()
		}
	}
	if known && en.kind == lt.CallSpawn && (problem == "" || canonErr != nil) {
		// A spawn's agent_spec is held to one reading in the model's own
		// text: the canonical form refuses a key given twice without
		// saying where, reads an escaped lone surrogate as U+FFFD and
		// keeps keys that differ in case, which the spawn's decoding
		// would fold into one field. Refused here, the call never runs.
		if err := strictSpawnArgs(tc.Arguments); err != nil {
			req.Kind, req.Class, problem = lt.CallInvalid, en.class, toolMessage(err)
		}
	}
	if err := r.add(lt.EventToolRequested, turnID, step, req); err != nil {
		return err
	}
	if problem == "" {
		return nil
	}
	return r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{Step: step, Index: index, CallID: tc.ID, Tool: tc.Name, Server: req.Server, Error: problem})
}

// modelFailed journals a failed call and applies the retry policy: transient
// errors are retried with backoff (honouring Retry-After), others end the
// turn. A step's call the provider found too long is retried once, after a
// forced compaction.
func (r *runner) modelFailed(ctx context.Context, purpose string, step, pos, attempt int, dur int64, err error, usage *lt.Usage) error {
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
	compactRetry := me.Kind == model.KindContextTooLong && purpose == "" && r.st.ContextRetryStep != step && r.compactionEnabled() && !outOfTime
	var wait time.Duration
	if retry {
		wait = r.backoff(attempt, me.RetryAfter, fmt.Sprintf("model/%s/%d", purpose, step))
	}
	if err := r.add(lt.EventModelFailed, turn.ID, step, lt.ModelFailedData{
		Purpose: purpose, Step: step, Position: pos, Attempt: attempt, Kind: string(me.Kind), Status: me.Status,
		RetryAfterMS: me.RetryAfter.Milliseconds(), Message: me.Message, Consumed: true, DurationMS: dur,
		Retry: retry || compactRetry, RetryInMS: wait.Milliseconds(), Usage: usage,
	}); err != nil {
		return err
	}
	if compactRetry {
		return nil // journal.Apply set ForceCompact: the next call compacts first
	}
	if purpose == lt.PurposeMonitor && !retry && !outOfTime {
		// The monitor gave no verdict: the review fails closed.
		return r.reviewFailedClosed(ctx, "failed closed: the monitor's model call failed: "+me.Error())
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
