package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// defaultReconcileTimeout bounds a reconcile probe of a tool whose agent
// sets no timeout: a probe that hangs must not hold the session's worker,
// and a person can always decide instead.
const defaultReconcileTimeout = time.Minute

// errNoAnswer is a probe that returned neither an answer nor an error.
var errNoAnswer = errors.New("the reconcile probe returned no answer")

// hasReconcileProbe reports whether c's tool has a reconcile probe
// (reconcile runs it).
func (r *runner) hasReconcileProbe(c *journal.Call) bool {
	if c.Kind != lt.CallBuiltin {
		return false
	}
	t, ok := r.tools.builtin(c.Tool)
	if !ok {
		return false
	}
	_, ok = t.(tool.Reconciler)
	return ok
}

// reconcile asks the tool of an irreversible call whose outcome the journal
// does not know whether the call took effect (DESIGN.md principle 3: "the
// tool's reconcile probe decides, or a person does"). It reports whether
// the probe settled the call:
//
//   - it happened: the call is completed with the probe's output and the
//     effect resolved as "reconciled";
//   - it did not: the attempt is journaled as failed and the call is
//     requested again, so it runs again with the same effect id and
//     idempotency key (through the checks every run passes);
//   - the tool has no probe, or the probe failed: not settled, and probeErr
//     says why when there was a probe. The caller raises the in_doubt
//     action.
//
// The probe is a read: nothing is made durable before it runs, and a crash
// during it only means it is asked again.
func (r *runner) reconcile(ctx context.Context, c *journal.Call) (settled bool, probeErr, err error) {
	if c.Kind != lt.CallBuiltin {
		return false, nil, nil
	}
	t, ok := r.tools.builtin(c.Tool)
	if !ok {
		return false, nil, nil
	}
	rec, ok := t.(tool.Reconciler)
	if !ok {
		return false, nil, nil
	}
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	timeout := r.tools.timeout(c.Tool)
	if timeout == 0 {
		timeout = defaultReconcileTimeout
	}
	call := &tool.Call{
		SessionID: r.st.Session.ID, Workspace: r.ws, Arguments: c.Arguments, IdempotencyKey: c.IdempotencyKey,
		Timeout: timeout, Effect: c.Class,
	}
	r.env.attach(call, true)
	end, err := r.workspaceFor(t, call) // a probe only looks, but may open the workspace
	if err != nil {
		return false, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	start := r.e.clock.Now()
	res, perr := rec.Reconcile(pctx, call)
	end()
	timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded)
	cancel()
	if ctx.Err() != nil {
		// Lease lost or hard stop: whoever resumes asks again.
		return false, nil, context.Cause(ctx)
	}
	dur := r.e.clock.Now().Sub(start).Milliseconds()
	if err := r.journalNetwork(c); err != nil {
		return false, nil, err
	}
	if perr == nil && res == nil {
		perr = errNoAnswer
	}
	if perr != nil {
		if timedOut {
			perr = fmt.Errorf("%w (the probe ran out of its %s)", perr, timeout)
		}
		return false, perr, nil
	}
	if !res.Happened {
		return true, nil, r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
			Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, EffectID: c.EffectID, DurationMS: dur,
			Error: fmt.Sprintf("reconciled: the tool's reconcile probe found that attempt %d did not take effect; "+
				"the call runs again with the same idempotency key", c.Attempts),
			Retry: true, Attempt: c.Attempts,
		})
	}
	out := json.RawMessage("null")
	if res.Output != nil {
		raw, err := json.Marshal(res.Output)
		if err != nil {
			// The probe answered, but with an output the journal cannot
			// hold: a person decides, seeing why.
			return false, fmt.Errorf("encode the reconcile probe's output: %w", err), nil
		}
		out = raw
	}
	return true, nil, r.add(lt.EventToolCompleted, turnID, step, lt.ToolCompletedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, EffectID: c.EffectID, Output: out, DurationMS: dur,
		Resolution: lt.ResolutionReconciled,
	})
}
