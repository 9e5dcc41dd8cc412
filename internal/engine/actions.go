package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListActions lists a session's required actions, optionally by status.
func (e *Engine) ListActions(ctx context.Context, sessionID, status string) ([]lt.Action, error) {
	switch lt.ActionStatus(status) {
	case "", lt.ActionPending, lt.ActionResolved, lt.ActionCancelled:
	default:
		return nil, apierror.Invalid("status", "must be pending, resolved or cancelled")
	}
	if _, err := e.store.SessionGet(ctx, sessionID); err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	rows, err := e.store.ActionList(ctx, sessionID, status)
	if err != nil {
		return nil, err
	}
	return decodeDocs[lt.Action](rows)
}

// DecideAction resolves a pending action. The decision and its consequence
// (e.g. the function's output as the tool result) are appended together, and
// the session becomes runnable again once nothing else is pending. Deciding a
// resolved action again with the same body returns it; a different body is a
// conflict. Two concurrent decisions: the journal's seq lets exactly one win.
// A decision on a monitor action lets go the sub-agents its pause held
// (monitorhold.go): after the decision's write, and again when it is
// repeated.
func (e *Engine) DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error) {
	a, err := e.decideAction(ctx, sessionID, actionID, d)
	if err != nil || a.Type != lt.ActionMonitor {
		return a, err
	}
	if err := e.releaseHold(ctx, sessionID); err != nil {
		return nil, err
	}
	return a, nil
}

// decideAction is DecideAction for the action itself.
func (e *Engine) decideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error) {
	sum, err := decisionSHA256(d)
	if err != nil {
		return nil, apierror.Invalid("", "decision is not valid JSON: %v", err)
	}
	// One read of the session per attempt: mutateRow's. The agent spec is
	// pinned at creation, so decoding it from the row the attempt built on
	// is the same as reading it beforehand; the loop reads again only when
	// a worker appended meanwhile (its compare-and-swap failed), which a
	// correct decision needs.
	var expiredAt *time.Time
	var stored *lt.Action
	var budgeted *lt.Session // a session whose budget the decision changed
	a, err := mutateRow(ctx, e, sessionID, func(row *store.SessionRow, b *batch) (*lt.Action, error) {
		expiredAt, stored, budgeted = nil, nil, nil
		a, _ := b.st.PendingAction(actionID)
		if a == nil {
			done, err := e.decidedAction(ctx, sessionID, actionID, sum)
			if err != nil {
				return nil, err
			}
			// The same decision again answers the first one's result, but
			// only to whom the policy lets decide: a refused decider
			// must not read a 200 (nor leave one in the audit log).
			if err := checkApprovers(done, b.actor(), b.st.Session.CreatedBy); err != nil {
				return nil, err
			}
			return done, nil
		}
		act := *a
		// Who decides is checked first: a refused decider changes
		// nothing, not even an expiry that is due.
		if err := checkApprovers(&act, b.actor(), b.st.Session.CreatedBy); err != nil {
			return nil, err
		}
		if expired(&act, e.clock.Now()) {
			// Too late: the call is rejected, and the decision refused.
			expiredAt = act.ExpiresAt
			if _, err := expireActions(b.add, b.st, e.clock.Now()); err != nil {
				return nil, err
			}
		} else {
			var spec lt.AgentSpec
			if err := json.Unmarshal(row.Spec, &spec); err != nil {
				return nil, fmt.Errorf("decode agent spec of %s: %w", sessionID, err)
			}
			if err := e.decisionEvents(b, &spec, &act, d, sum); err != nil {
				return nil, err
			}
			if act.Type == lt.ActionBudget && d.Decision == lt.DecisionApprove {
				v := b.st.View()
				budgeted = &v
			}
		}
		if len(b.st.Pending) == 0 && b.st.Session.Status == lt.SessionRequiresAction {
			if err := b.status(lt.SessionRunning, ""); err != nil {
				return nil, err
			}
		}
		var err error
		stored, err = resolvedDoc(b, actionID)
		return &act, err
	})
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	if budgeted != nil {
		// As a PATCH of the budget does: running sub-agents are held to
		// the root's new limits at once, not at the root's next call.
		if err := e.syncTreeLimits(ctx, budgeted); err != nil {
			return nil, fmt.Errorf("update the tree's budget of session %s: %w", sessionID, err)
		}
	}
	if expiredAt != nil {
		return nil, apierror.Conflict("action %s expired at %s: the call was rejected and not run", actionID, expiredAt.UTC().Format(time.RFC3339))
	}
	if a.Status != lt.ActionPending {
		return a, nil
	}
	if stored != nil {
		// The stored (resolved) form: the row this batch wrote, read
		// back as it was written.
		return stored, nil
	}
	// The batch did not write the action's row: read what is stored.
	row, err := e.store.ActionGet(ctx, sessionID, actionID)
	if err != nil {
		return nil, err
	}
	var out lt.Action
	if err := json.Unmarshal(row.Doc, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// resolvedDoc is the action row a batch writes for actionID, decoded as a
// read of it would be (nil when the batch does not write it).
func resolvedDoc(b *batch, actionID string) (*lt.Action, error) {
	for _, d := range b.changes.Docs() {
		if d.Kind != journal.DocAction || d.ID != actionID {
			continue
		}
		raw, err := json.Marshal(d.Value)
		if err != nil {
			return nil, err
		}
		var out lt.Action
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	return nil, nil
}

// decidedAction answers a decision on an action that is no longer pending.
func (e *Engine) decidedAction(ctx context.Context, sessionID, actionID, sum string) (*lt.Action, error) {
	row, err := e.store.ActionGet(ctx, sessionID, actionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierror.NotFound("action %s not found in session %s", actionID, sessionID)
	}
	if err != nil {
		return nil, err
	}
	var a lt.Action
	if err := json.Unmarshal(row.Doc, &a); err != nil {
		return nil, err
	}
	if a.Status == lt.ActionResolved && len(a.Resolution) > 0 {
		var prev lt.Decision
		if err := json.Unmarshal(a.Resolution, &prev); err == nil {
			if prevSum, err := decisionSHA256(&prev); err == nil && prevSum == sum {
				return &a, nil
			}
		}
	}
	var prev lt.Decision
	if json.Unmarshal(a.Resolution, &prev) == nil && prev.Decision == lt.DecisionExpired {
		return nil, apierror.Conflict("action %s expired: the call was rejected and not run", actionID)
	}
	return nil, apierror.Conflict("action %s is already %s", actionID, a.Status)
}

func decisionSHA256(d *lt.Decision) (string, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	canon, err := tool.CanonicalJSON(raw)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(canon)
	return hex.EncodeToString(s[:]), nil
}

// decisionEvents validates d for the action's type and adds the events that
// carry it out. spec is the session's agent (for the schemas of edited
// arguments).
func (e *Engine) decisionEvents(b *batch, spec *lt.AgentSpec, a *lt.Action, d *lt.Decision, sum string) error {
	resolved := lt.ActionResolvedData{ActionID: a.ID, Type: string(a.Type), CallID: a.CallID, Decision: *d, DecisionSHA256: sum, Actor: b.actor()}
	if a.Type == lt.ActionBudget {
		return budgetDecision(b, a, d, resolved, e.clock.Now())
	}
	if a.Type == lt.ActionEnvironmentConnection {
		return envConnectionDecision(b, a, d, resolved)
	}
	if a.Type == lt.ActionMonitor {
		return monitorDecision(b, a, d, resolved)
	}
	call := b.st.CallByID(a.Step, a.CallID)
	if call == nil {
		return apierror.Conflict("action %s no longer matches a tool call", a.ID)
	}
	if a.Type == lt.ActionBrowserPermission {
		return browserPermissionDecision(b, a, call, d, resolved)
	}
	failed := func(msg, refused, resolution string) lt.ToolFailedData {
		return lt.ToolFailedData{
			Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, EffectID: call.EffectID,
			Error: msg, Refused: refused, Resolution: resolution,
		}
	}
	switch a.Type {
	case lt.ActionApproval:
		return e.approvalDecision(b, spec, a, call, d, resolved)
	case lt.ActionInput:
		if a.Kind == lt.InputFile {
			return apierror.Conflict("action %s asks for a file: upload it with PUT /v1/sessions/%s/files/%s?action_id=%s", a.ID, a.SessionID, a.Path, a.ID)
		}
		if d.Decision != "" || d.Arguments != nil || len(d.Output) > 0 || d.Error != "" || d.Budget != nil || d.ArgumentsSHA256 != "" {
			return apierror.Invalid("decision", "an input action takes only answer")
		}
		if strings.TrimSpace(d.Answer) == "" {
			return apierror.Invalid("answer", "required: the answer to the agent's question")
		}
		if len(a.Choices) > 0 && !slices.Contains(a.Choices, d.Answer) {
			return apierror.Invalid("answer", "must be one of the choices: %s", strings.Join(a.Choices, ", "))
		}
		out, err := json.Marshal(map[string]string{"answer": d.Answer})
		if err != nil {
			return err
		}
		if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved); err != nil {
			return err
		}
		return b.add(lt.EventToolCompleted, a.TurnID, a.Step, lt.ToolCompletedData{
			Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, Output: out,
		})
	case lt.ActionFunctionCall:
		if d.Decision != "" || d.Arguments != nil || d.Answer != "" || d.Budget != nil || d.Reason != "" || d.ArgumentsSHA256 != "" {
			return apierror.Invalid("decision", "a function_call action takes only output or error")
		}
		hasOutput := len(d.Output) > 0
		if hasOutput == (d.Error != "") {
			return apierror.Invalid("output", "give exactly one of output and error")
		}
		if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved); err != nil {
			return err
		}
		if hasOutput {
			return b.add(lt.EventToolCompleted, a.TurnID, a.Step, lt.ToolCompletedData{
				Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, EffectID: call.EffectID, Output: d.Output,
			})
		}
		return b.add(lt.EventToolFailed, a.TurnID, a.Step, failed(d.Error, "", ""))
	case lt.ActionInDoubt:
		if d.Arguments != nil || d.Answer != "" || d.Budget != nil || d.Error != "" || d.ArgumentsSHA256 != "" {
			return apierror.Invalid("decision", "an in_doubt action takes decision (and output when it happened)")
		}
		switch d.Decision {
		case lt.DecisionHappened:
			out := d.Output
			if len(out) == 0 {
				out = json.RawMessage("null")
			}
			if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved); err != nil {
				return err
			}
			return b.add(lt.EventToolCompleted, a.TurnID, a.Step, lt.ToolCompletedData{
				Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, EffectID: call.EffectID,
				Output: out, Resolution: lt.DecisionHappened,
			})
		case lt.DecisionDidNotHappen, lt.DecisionSkip:
			if len(d.Output) > 0 {
				return apierror.Invalid("output", "output goes only with decision %q", lt.DecisionHappened)
			}
			if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved); err != nil {
				return err
			}
			if d.Decision == lt.DecisionDidNotHappen {
				return nil // journal.Apply returns the call to requested: it runs again
			}
			msg := "skipped by a person: the outcome of this call is unknown and it was not run again"
			if d.Reason != "" {
				msg += " (" + d.Reason + ")"
			}
			return b.add(lt.EventToolFailed, a.TurnID, a.Step, failed(msg, "", lt.DecisionSkip))
		default:
			return apierror.Invalid("decision", "must be happened, did_not_happen or skip")
		}
	default:
		return apierror.Invalid("decision", "actions of type %s cannot be decided", a.Type)
	}
}

// approvalDecision carries out approve (optionally with edited arguments,
// which are validated and re-bound), reject (the reason goes back to the
// model) and stop (the turn ends).
func (e *Engine) approvalDecision(b *batch, spec *lt.AgentSpec, a *lt.Action, call *journal.Call, d *lt.Decision, resolved lt.ActionResolvedData) error {
	if d.Answer != "" || len(d.Output) > 0 || d.Error != "" || d.Budget != nil {
		return apierror.Invalid("decision", "an approval takes decision (approve, reject or stop), and arguments or reason")
	}
	if d.ArgumentsSHA256 != "" && d.ArgumentsSHA256 != a.ArgumentsSHA256 {
		return apierror.Conflict("arguments_sha256 %s is not the hash of the arguments awaiting approval (%s): look at the action again", d.ArgumentsSHA256, a.ArgumentsSHA256)
	}
	if d.Decision != lt.DecisionApprove && d.Arguments != nil {
		return apierror.Invalid("arguments", "edited arguments go only with decision %q", lt.DecisionApprove)
	}
	switch d.Decision {
	case lt.DecisionApprove:
		canon, sum := call.Arguments, call.ArgumentsSHA256
		if d.Arguments != nil {
			var err error
			if canon, err = e.validateEdit(spec, call, d.Arguments); err != nil {
				return err
			}
			if sum, err = tool.ArgumentsSHA256(canon); err != nil {
				return apierror.Invalid("arguments", "%v", err)
			}
			resolved.Arguments = canon
		}
		resolved.ArgumentsSHA256 = sum
		return b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved)
	case lt.DecisionReject:
		if strings.TrimSpace(d.Reason) == "" {
			return apierror.Invalid("reason", "required: it goes back to the agent as the tool's result")
		}
		if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved); err != nil {
			return err
		}
		return b.add(lt.EventToolFailed, a.TurnID, a.Step, lt.ToolFailedData{
			Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, Refused: lt.RefusedRejected,
			Error: "rejected by a person: " + d.Reason,
		})
	case lt.DecisionStop:
		if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved); err != nil {
			return err
		}
		msg := "stopped by a person"
		if d.Reason != "" {
			msg += ": " + d.Reason
		}
		if err := b.add(lt.EventToolFailed, a.TurnID, a.Step, lt.ToolFailedData{
			Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, Refused: lt.RefusedStopped, Error: msg,
		}); err != nil {
			return err
		}
		return endTurn(b, lt.StopStopped, msg)
	default:
		return apierror.Invalid("decision", "must be approve, reject or stop")
	}
}

// validateEdit checks edited arguments against the tool's schema and
// returns their canonical form. Errors name the field under "arguments".
func (e *Engine) validateEdit(spec *lt.AgentSpec, call *journal.Call, args json.RawMessage) (json.RawMessage, error) {
	canon, err := tool.CanonicalJSON(args)
	if err != nil {
		return nil, apierror.Invalid("arguments", "not valid JSON: %v", err)
	}
	// The agent's function or built-in of that name; an MCP tool's edited
	// arguments are checked against its listing when the call runs
	// (runMCP), so here only against any object.
	var schema json.RawMessage
	if en, ok := newToolCatalog(e.tools, spec).lookup(call.Tool); ok &&
		(en.ns == nsFunction || (en.ns == nsBuiltin && call.Kind == lt.CallBuiltin)) {
		schema = en.schema
	}
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	if err := tool.ValidateArguments(schema, canon); err != nil {
		var fe *tool.FieldError
		if errors.As(err, &fe) {
			return nil, apierror.Invalid(fe.Field, "%s", fe.Message)
		}
		return nil, apierror.Invalid("arguments", "%v", err)
	}
	return canon, nil
}

// budgetDecision carries out a budget action: approve (with optional new
// limits; the soft threshold that was reached is lifted unless the new
// limits move it past the usage) or stop (the turn ends, budget_exceeded).
func budgetDecision(b *batch, a *lt.Action, d *lt.Decision, resolved lt.ActionResolvedData, now time.Time) error {
	if d.Arguments != nil || d.Answer != "" || len(d.Output) > 0 || d.Error != "" || d.ArgumentsSHA256 != "" {
		return apierror.Invalid("decision", "a budget action takes decision (approve or stop) and, to approve, budget")
	}
	switch d.Decision {
	case lt.DecisionApprove:
		nb := mergeBudget(b.st.Session.Budget, d.Budget)
		if a.Limit != nil {
			if soft := softOf(&nb, a.Limit.Name); soft > 0 && soft <= usedOf(b.st, a.Limit.Name, now) {
				clearSoft(&nb, a.Limit.Name)
			}
		}
		if err := validateBudget(nb, "budget"); err != nil {
			return err
		}
		resolved.Budget = &nb
		return b.add(lt.EventActionResolved, a.TurnID, 0, resolved)
	case lt.DecisionStop:
		if d.Budget != nil {
			return apierror.Invalid("budget", "new limits go only with decision %q", lt.DecisionApprove)
		}
		msg := "stopped by a person at a soft budget limit"
		if a.Limit != nil {
			msg += " (" + a.Limit.Name + ")"
		}
		return stopAtAction(b, a, resolved, lt.StopBudgetExceeded, msg, d.Reason)
	default:
		return apierror.Invalid("decision", "must be approve or stop")
	}
}

// stopAtAction resolves a (a person's decision stop) and ends the turn
// with stopReason; the error says msg, then the person's reason.
func stopAtAction(b *batch, a *lt.Action, resolved lt.ActionResolvedData, stopReason, msg, reason string) error {
	if err := b.add(lt.EventActionResolved, a.TurnID, 0, resolved); err != nil {
		return err
	}
	if reason != "" {
		msg += ": " + reason
	}
	return endTurn(b, stopReason, msg)
}

// endTurn fails the current turn from the API side (a person stopped it);
// the session goes on with a queued turn, or fails.
func endTurn(b *batch, stopReason, msg string) error {
	turn := b.st.CurrentTurn()
	if turn == nil {
		return nil
	}
	if err := answerUnrun(b.add, b.st, turn.ID, msg, "", nil); err != nil {
		return err
	}
	if err := b.add(lt.EventTurnFailed, turn.ID, 0, lt.TurnFailedData{TurnID: turn.ID, StopReason: stopReason, Error: msg}); err != nil {
		return err
	}
	if len(b.st.Turns) > 0 {
		return b.status(lt.SessionRunning, "")
	}
	return b.status(lt.SessionFailed, stopReason)
}

// expireActions rejects the pending approvals whose expiry has passed: the
// call is refused and the model told why. It returns how many it expired.
func expireActions(add func(typ, turnID string, step int, data any) error, st *journal.State, now time.Time) (int, error) {
	n := 0
	for _, a := range append([]lt.Action(nil), st.Pending...) {
		if a.Type != lt.ActionApproval || !expired(&a, now) {
			continue
		}
		call := st.CallByID(a.Step, a.CallID)
		if call == nil {
			continue
		}
		d := lt.Decision{Decision: lt.DecisionExpired}
		sum, err := decisionSHA256(&d)
		if err != nil {
			return n, err
		}
		if err := add(lt.EventActionResolved, a.TurnID, a.Step, lt.ActionResolvedData{
			ActionID: a.ID, Type: string(a.Type), CallID: a.CallID, Decision: d, DecisionSHA256: sum,
		}); err != nil {
			return n, err
		}
		if err := add(lt.EventToolFailed, a.TurnID, a.Step, lt.ToolFailedData{
			Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, Refused: lt.RefusedApprovalExpired,
			Error: fmt.Sprintf("refused: the approval expired at %s before anyone decided", a.ExpiresAt.UTC().Format(time.RFC3339)),
		}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
