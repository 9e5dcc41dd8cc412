package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

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
func (e *Engine) DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error) {
	sum, err := decisionSHA256(d)
	if err != nil {
		return nil, apierror.Invalid("", "decision is not valid JSON: %v", err)
	}
	a, err := mutate(ctx, e, sessionID, func(b *batch) (*lt.Action, error) {
		a, _ := b.st.PendingAction(actionID)
		if a == nil {
			return e.decidedAction(ctx, sessionID, actionID, sum)
		}
		act := *a
		if err := decisionEvents(b, &act, d, sum); err != nil {
			return nil, err
		}
		if len(b.st.Pending) == 0 && b.st.Session.Status == lt.SessionRequiresAction {
			if err := b.status(lt.SessionRunning, ""); err != nil {
				return nil, err
			}
		}
		return &act, nil
	})
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	if a.Status == lt.ActionPending {
		// Return the stored (resolved) form.
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
	return a, nil
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
// carry it out.
func decisionEvents(b *batch, a *lt.Action, d *lt.Decision, sum string) error {
	resolved := journal.ActionResolved{ActionID: a.ID, Type: string(a.Type), Decision: *d, DecisionSHA256: sum}
	call := b.st.CallByID(a.Step, a.CallID)
	if call == nil {
		return apierror.Conflict("action %s no longer matches a tool call", a.ID)
	}
	switch a.Type {
	case lt.ActionFunctionCall:
		if d.Decision != "" || d.Arguments != nil || d.Answer != "" || d.Budget != nil || d.Reason != "" {
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
			return b.add(lt.EventToolCompleted, a.TurnID, a.Step, journal.ToolCompleted{
				Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, EffectID: call.EffectID, Output: d.Output,
			})
		}
		return b.add(lt.EventToolFailed, a.TurnID, a.Step, journal.ToolFailed{
			Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, EffectID: call.EffectID, Error: d.Error,
		})
	case lt.ActionInDoubt:
		if d.Arguments != nil || d.Answer != "" || d.Budget != nil || d.Error != "" {
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
			return b.add(lt.EventToolCompleted, a.TurnID, a.Step, journal.ToolCompleted{
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
			return b.add(lt.EventToolFailed, a.TurnID, a.Step, journal.ToolFailed{
				Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, EffectID: call.EffectID,
				Error: msg, Resolution: lt.DecisionSkip,
			})
		default:
			return apierror.Invalid("decision", "must be happened, did_not_happen or skip")
		}
	default:
		return apierror.Invalid("decision", "actions of type %s are not supported by this version", a.Type)
	}
}
