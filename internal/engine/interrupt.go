package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Interrupting a call in flight. The limits that bound a turn in time
// (the session's max_wall_seconds, counted from its creation, and the
// agent's turn_timeout_seconds, counted from the turn's start, both less
// the time the session was paused: journal/pause.go) and a
// person's cancel must bind while a call runs, not only between calls: a
// model request, a shell command, an MCP call is run under a context of
// its own (callContext) that is cancelled, with an *interruptCause, when
// the first of them passes or a cancel is journaled (watchCancel). What
// the call leaves behind is journaled in one place per kind of call
// (toolInterrupted, modelInterrupted, waitInterrupted), and the turn stops
// for the cause in one place (stopFor).
//
// The durable waits (sleep, wait_for_signal, wait_agents) run no call: the
// session is a parked row, and the deadlines are wake times of that row
// (journal.State.WakeAt), so it is claimed at the deadline and the wait
// ends there (waitInterrupted).

// interruptKind names what cut a call in flight; the journal records it as
// the `interrupted` field of tool.failed and model.failed. Each kind has
// its stop in stopFor (interruptSteer, steer.go, only ever cuts a step's
// model call).
type interruptKind string

const (
	interruptWall        interruptKind = "max_wall_seconds"
	interruptTurnTimeout interruptKind = "turn_timeout"
	interruptCancel      interruptKind = "cancelled"
)

// interruptCause is the cause a call's context is cancelled with.
type interruptCause struct {
	kind interruptKind
	msg  string // why, for the journal and the model
}

func (c *interruptCause) Error() string { return c.msg }

// deadline returns the first deadline that bounds the current turn's calls
// and the cause it cuts them with; ok is false when nothing bounds them.
// wall says whether the wall-clock budget counts: not for a verification
// call, which the budget checks only before it starts (docs/api.md,
// Budgets).
func (r *runner) deadline(wall bool) (at time.Time, cause *interruptCause, ok bool) {
	if end := r.st.WallDeadline(); wall && end != nil {
		at, ok = *end, true
		cause = &interruptCause{kind: interruptWall,
			msg: fmt.Sprintf("the session's wall-clock budget ran out (max_wall_seconds %d)", r.st.Session.Budget.MaxWallSeconds)}
	}
	if end, has := r.turnDeadline(); has && (!ok || end.Before(at)) {
		at, ok = end, true
		cause = &interruptCause{kind: interruptTurnTimeout,
			msg: fmt.Sprintf("the turn ran past its timeout of %d s", r.spec.TurnTimeoutSeconds)}
	}
	return at, cause, ok
}

// turnDeadline is when the current turn's timeout ends it, if it has one.
func (r *runner) turnDeadline() (time.Time, bool) {
	if d := r.st.TurnDeadline; d != nil {
		return *d, true // as journaled when the turn started
	}
	t := r.st.CurrentTurn()
	if r.spec.TurnTimeoutSeconds <= 0 || t == nil || t.StartedAt == nil {
		return time.Time{}, false
	}
	return t.StartedAt.Add(time.Duration(r.spec.TurnTimeoutSeconds) * time.Second), true
}

// newTurnDeadline is the deadline a turn starting now gets (journaled with
// turn.started, so a session parked in a wait wakes at it), if any.
func (r *runner) newTurnDeadline() *time.Time {
	if r.spec.TurnTimeoutSeconds <= 0 {
		return nil
	}
	t := r.e.clock.Now().Add(time.Duration(r.spec.TurnTimeoutSeconds) * time.Second)
	return &t
}

// interruptDue returns the cause whose deadline has passed, if one has.
func (r *runner) interruptDue() *interruptCause {
	at, cause, ok := r.deadline(true)
	if !ok || r.e.clock.Now().Before(at) {
		return nil
	}
	return cause
}

// controlDue returns the cause with which a control another writer
// journaled (a cancel, a steer) cuts a call, nil while none does.
type controlDue func(st *journal.State) *interruptCause

// cancelDue cuts any call once a cancel is requested.
func cancelDue(st *journal.State) *interruptCause {
	if st.Cancel == nil {
		return nil
	}
	return cancelCause(st.Cancel)
}

// callContext derives the context one call in flight runs under: it ends
// with ctx (a lost lease, a hard stop), and is cancelled with an
// *interruptCause when the turn's first deadline passes on the engine's
// clock or when a cancel of the session is journaled. The deadline watcher
// re-reads the clock whenever its timer fires, so a clock that moves by
// other means than real time (a test's) is followed. wall is as in
// deadline. release must be called when the call returns.
func (r *runner) callContext(ctx context.Context, wall bool) (callCtx context.Context, release func()) {
	return r.controlledContext(ctx, wall, cancelDue)
}

// controlledContext is callContext with the controls that cut the call
// given by due (a step's model call is also cut by a steer: steerDue).
func (r *runner) controlledContext(ctx context.Context, wall bool, due controlDue) (callCtx context.Context, release func()) {
	callCtx, cancel := context.WithCancelCause(ctx)
	end := func() { cancel(nil) }
	if cause := due(r.st); cause != nil {
		cancel(cause) // read in as the call's start was made durable
	} else {
		w := &lazyWatch{}
		// Subscribed before the claim's watch is asked, so an append is
		// heard by one or the other (see claimWatch).
		sid, seen := r.st.Session.ID, r.durableSeq
		grew, stop := r.e.hub.watchWake(sid, w.announced)
		readNow := r.claim == nil || r.claim.latest() > seen
		w.run = func(polled bool) {
			go r.e.watchCancel(callCtx, cancel, sid, seen, due, grew, stop, readNow || polled, polled)
		}
		w.stop = stop
		w.arm(readNow, r.e.cfg.PollInterval)
		end = func() {
			cancel(nil)
			w.end()
		}
	}
	at, cause, ok := r.deadline(wall)
	if !ok {
		return callCtx, end
	}
	clock := r.e.clock
	go func() {
		for {
			left := at.Sub(clock.Now())
			if left <= 0 {
				cancel(cause)
				return
			}
			select {
			case <-clock.After(left):
			case <-callCtx.Done():
				return
			}
		}
	}()
	return callCtx, end
}

// lazyWatch starts a call's control watcher (watchCancel) only once it has
// something to do: at once when the call must read the session first
// (readNow), else when the hub announces that the session's journal grew
// (the seq waits in the watcher's channel) or when its first poll is due.
// Most calls end before either: they start no goroutine and no ticker.
type lazyWatch struct {
	// state: 0 being set up, 1 armed, 2 started, 3 ended (the call
	// returned before the watcher started: the subscription is dropped).
	state atomic.Int32
	// heard is set by the hub's first announce, which may come while the
	// watcher is set up (its seq waits in the channel).
	heard atomic.Bool
	run   func(polled bool) // starts watchCancel
	stop  func()            // drops the subscription
	poll  *time.Timer
}

// announced is the hub's wake: the session's journal grew.
func (w *lazyWatch) announced() {
	w.heard.Store(true)
	w.begin(false)
}

// arm lets the hub's announces start the watcher, and starts it now if
// readNow or if one came while it was set up, else at the first poll.
// Whichever of arm and announced comes second sees the other's store
// (both are atomic), so no announce is missed.
func (w *lazyWatch) arm(readNow bool, poll time.Duration) {
	w.state.Store(1)
	if readNow || w.heard.Load() {
		w.begin(false)
		return
	}
	w.poll = time.AfterFunc(poll, func() { w.begin(true) })
}

// begin starts the watcher unless it was started or the call ended; polled
// says the poll is why (the watcher reads the session as a poll would).
// The hub calls it under its lock: it only starts a goroutine.
func (w *lazyWatch) begin(polled bool) {
	if w.state.CompareAndSwap(1, 2) {
		w.run(polled)
	}
}

// end is called once the call's context is cancelled: a started watcher
// sees it and drops its subscription itself; one never started drops it
// here.
func (w *lazyWatch) end() {
	if w.poll != nil {
		w.poll.Stop()
	}
	if w.state.CompareAndSwap(1, 3) {
		w.stop()
	}
}

// watchCancel cancels a call's context with the cause due finds once the
// session's journal holds a control that cuts the call (a cancel request,
// a steer with interrupt). The request is written by
// the API on whichever node took it, so the stored state is what is read:
// at once if readNow (an append the runner has not read was heard since
// the claim began: it may be a cancel that came after the runner last read
// the session), whenever the store says the session's journal grew (grew:
// at once on this node, and across nodes through the store's notifier),
// and every poll interval for a store whose notifications were lost. The
// runner checked its own state, durable up to seq seen, before the call:
// the stored state is decoded only once the journal holds more. At a poll,
// which nothing announced, the session's last seq alone is read first: a
// call of a few seconds outlives a poll interval or two, and the journal
// has nearly always not grown. stop ends the subscription grew comes from.
// polled says a poll started it (lazyWatch): it reads as at a poll first.
func (e *Engine) watchCancel(callCtx context.Context, cancel context.CancelCauseFunc, sessionID string, seen int64, due controlDue,
	grew <-chan int64, stop func(), readNow, polled bool) {
	defer stop()
	poll := time.NewTicker(e.cfg.PollInterval)
	defer poll.Stop()
	for {
		if readNow && polled {
			if seq, err := e.store.SessionLastSeq(callCtx, sessionID); err == nil && seq <= seen {
				readNow = false
			}
		}
		if readNow {
			if row, err := e.store.SessionGet(callCtx, sessionID); err == nil && row.LastSeq > seen {
				var st journal.State
				if json.Unmarshal(row.State, &st) == nil {
					if cause := due(&st); cause != nil {
						cancel(cause)
						return
					}
					seen = row.LastSeq
				}
			}
		}
		select {
		case seq := <-grew:
			// The runner's own appends are heard too: only a seq beyond
			// what it has read is worth reading the session for.
			readNow, polled = seq > seen, false
		case <-poll.C:
			readNow, polled = true, true
		case <-callCtx.Done():
			return
		}
	}
}

// claimWatch hears a claimed session's journal grow for the whole claim: it
// subscribes before the claim's runner first reads the session, so every
// append committed after that read is heard (at once from this node, a
// moment later from others, through the store's notifier). A call's
// control watcher (watchCancel) subscribes for itself as the call starts;
// what was appended between the runner's last read and that moment is
// heard here, so the watcher reads the session at once only if this watch
// heard an append the runner has not read, instead of at every call.
// Only the runner's goroutine uses it.
type claimWatch struct {
	grew  <-chan int64
	stop  func()
	heard int64 // the highest seq heard so far
}

func (e *Engine) watchClaim(sessionID string) *claimWatch {
	grew, stop := e.hub.watch(sessionID)
	return &claimWatch{grew: grew, stop: stop}
}

// latest returns the highest seq heard so far. The hub keeps only a
// watcher's newest seq, which is its highest: a session's seqs only grow.
func (w *claimWatch) latest() int64 {
	for {
		select {
		case seq := <-w.grew:
			w.heard = max(w.heard, seq)
		default:
			return w.heard
		}
	}
}

func cancelCause(c *lt.SessionCancelRequestedData) *interruptCause {
	msg := "the session was cancelled"
	if c.Reason != "" {
		msg += ": " + c.Reason
	}
	return &interruptCause{kind: interruptCancel, msg: msg}
}

// interruption returns the cause that cut a call run under callCtx, or nil
// when the call ended by itself or ctx (the runner's) ended: a lost lease
// or a hard stop is no interruption, the call stays started and whoever
// resumes settles it.
func interruption(ctx, callCtx context.Context) *interruptCause {
	if ctx.Err() != nil {
		return nil
	}
	var cause *interruptCause
	if errors.As(context.Cause(callCtx), &cause) {
		return cause
	}
	return nil
}

// toolInterrupted journals a tool call (built-in or MCP) that cause cut
// midway. An irreversible one may have taken effect: it is settled by its
// tool's reconcile probe, or becomes in doubt (an in_doubt action a person
// decides), and is never re-run blindly; once it is settled the next tick's
// checks stop the turn before anything else runs. Any other call failed:
// it is journaled as interrupted with what it wrote so far, and the turn
// stops at once.
func (r *runner) toolInterrupted(ctx context.Context, c *journal.Call, cause *interruptCause, res *tool.Result, out json.RawMessage, dur int64) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	cur := r.st.Call(step, c.Index) // c may predate a merge
	if cur == nil || cur.ID != c.ID {
		return fmt.Errorf("interrupted call %s is not in step %d", c.ID, step)
	}
	if cur.Class == lt.EffectIrreversible {
		evidence := []string{fmt.Sprintf("cut after %d ms: %s", dur, cause.msg)}
		if res != nil && res.Error != "" {
			evidence = append(evidence, "the tool said: "+clip(res.Error, 500))
		}
		if len(out) > 0 {
			evidence = append(evidence, "its output so far: "+clip(string(out), 2000))
		}
		if err := r.settleUnknown(ctx, cur, "interrupted in flight: "+cause.msg, evidence...); err != nil {
			return err
		}
		if cause.kind == interruptCancel {
			return r.merge(ctx) // the next tick holds the cancel until the call is settled
		}
		return nil
	}
	if err := r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
		Step: step, Index: cur.Index, CallID: cur.ID, Tool: cur.Tool, Server: r.mcpServerOf(cur), EffectID: cur.EffectID,
		Error: "interrupted: " + cause.msg, Output: out, DurationMS: dur, Attempt: cur.Attempts, Interrupted: string(cause.kind),
	}); err != nil {
		return err
	}
	return r.stopFor(ctx, cause)
}

// cancelledBeforeRun journals a spawn call that read in a cancel as the
// call was made durable (merged from the store by that append): no child
// was made, so the call failed, having done nothing, and the next tick
// cancels the turn. (A tool call's start is dropped instead: startDurably.)
func (r *runner) cancelledBeforeRun(c *journal.Call) error {
	cause := cancelCause(r.st.Cancel)
	cur := r.st.Call(r.st.Step.N, c.Index) // c may predate the merge
	if cur == nil || cur.ID != c.ID {
		return fmt.Errorf("cancelled call %s is not in step %d", c.ID, r.st.Step.N)
	}
	return r.add(lt.EventToolFailed, r.st.Step.TurnID, r.st.Step.N, lt.ToolFailedData{
		Step: r.st.Step.N, Index: cur.Index, CallID: cur.ID, Tool: cur.Tool, Server: r.mcpServerOf(cur),
		Error: "not run: " + cause.msg, Attempt: cur.Attempts, Interrupted: string(cause.kind), Refused: lt.RefusedTurnEnded,
	})
}

// modelInterrupted journals a model call that cause cut midway: it failed
// with kind timeout (a deadline passed; Interrupted says which), is not
// retried, and counts what it was sent; then the turn stops.
func (r *runner) modelInterrupted(ctx context.Context, cause *interruptCause, failed lt.ModelFailedData, usage lt.Usage) error {
	failed.Kind, failed.Message, failed.Interrupted = string(model.KindTimeout), cause.msg, string(cause.kind)
	failed.Consumed, failed.Retry, failed.Usage = true, false, &usage
	if err := r.add(lt.EventModelFailed, r.st.CurrentTurn().ID, failed.Step, failed); err != nil {
		return err
	}
	return r.stopFor(ctx, cause)
}

// waitInterrupted ends a durable wait that cause cut before it was over:
// the waiting call failed, and the turn stops.
func (r *runner) waitInterrupted(ctx context.Context, cause *interruptCause) error {
	w := r.st.Wait
	c := r.st.Call(w.Step, w.Index)
	if c == nil {
		return fmt.Errorf("wait on unknown call %s", w.CallID)
	}
	if err := r.add(lt.EventToolFailed, r.st.Step.TurnID, w.Step, lt.ToolFailedData{
		Step: w.Step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Error: "interrupted: " + cause.msg, Interrupted: string(cause.kind),
	}); err != nil {
		return err
	}
	return r.stopFor(ctx, cause)
}

// stopFor ends the turn for the cause that cut its call: budget_exceeded
// (with budget.exceeded) for the wall-clock budget, timeout for the turn's.
// A cancel was journaled by another writer: the runner reads it in
// (merge), and the next tick cancels the turns before anything else runs.
func (r *runner) stopFor(ctx context.Context, cause *interruptCause) error {
	switch cause.kind {
	case interruptWall:
		b := r.st.Session.Budget
		used := r.st.WallElapsed(r.e.clock.Now()).Seconds()
		return r.exceed(budgetDim{"wall_seconds", float64(b.SoftWallSeconds), float64(b.MaxWallSeconds), used, used})
	case interruptTurnTimeout:
		return r.failTurn(lt.StopTimeout, cause.msg)
	case interruptCancel:
		return r.merge(ctx)
	case interruptSteer:
		return r.steerStop(ctx)
	default:
		return fmt.Errorf("no stop for interruption %q", cause.kind)
	}
}

// abandonedUsage is what an abandoned model call counts: the usage the
// provider reported, if it returned any with its error, else the request's
// input and the output it streamed (streamed), counted offline and priced
// as the model is, so token and cost budgets still bind calls that never
// answer.
func abandonedUsage(spec lt.ModelSpec, counter model.Counter, resp *model.Response, contextTokens int, streamed string) lt.Usage {
	if resp != nil && (resp.Usage.InputTokens > 0 || resp.Usage.OutputTokens > 0) {
		u := resp.Usage
		u.CostUSD = resp.CostUSD
		return u
	}
	u := lt.Usage{InputTokens: int64(contextTokens), Estimated: true}
	if streamed != "" {
		u.OutputTokens = int64(model.CountMessages(counter, []model.Message{{Role: model.RoleAssistant, Text: streamed}}, nil))
	}
	u.CostUSD = model.CostOf(spec, u)
	return u
}
