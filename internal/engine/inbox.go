package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Page sizes of the action inbox (API.md "Lists").
const (
	defaultInboxLimit = 50
	maxInboxLimit     = 500
)

// actionTypes are the values the inbox's type filter accepts.
var actionTypes = []lt.ActionType{lt.ActionApproval, lt.ActionFunctionCall, lt.ActionInput, lt.ActionInDoubt, lt.ActionBudget, lt.ActionEnvironmentConnection, lt.ActionBrowserPermission, lt.ActionMonitor}

// ListAllActions is the inbox: required actions across sessions in creation
// order, filtered by status, type and session. Limit 0 means 50 (at most
// 500). The cursor is opaque to clients: it encodes the position of the
// page's last action, so a page never repeats or skips an action even while
// others are created or resolved.
func (e *Engine) ListAllActions(ctx context.Context, p lt.ListActionsParams) (*lt.List[lt.Action], error) {
	switch lt.ActionStatus(p.Status) {
	case "", lt.ActionPending, lt.ActionResolved, lt.ActionCancelled:
	default:
		return nil, apierror.Invalid("status", "must be pending, resolved or cancelled, got %q", p.Status)
	}
	if p.Type != "" && !validActionType(p.Type) {
		return nil, apierror.Invalid("type", "must be approval, function_call, input, in_doubt, budget, environment_connection, browser_permission or monitor, got %q", p.Type)
	}
	limit := p.Limit
	switch {
	case limit < 0 || limit > maxInboxLimit:
		return nil, apierror.Invalid("limit", "must be between 1 and %d, got %d", maxInboxLimit, limit)
	case limit == 0:
		limit = defaultInboxLimit
	}
	var after *store.DocCursor
	if p.Cursor != "" {
		c, err := decodeActionCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		after = c
	}
	if p.SessionID != "" {
		// A filter on a session that does not exist is a mistake worth
		// naming: an empty inbox would say "nothing to decide" instead.
		if _, err := e.store.SessionGet(ctx, p.SessionID); err != nil {
			return nil, notFound(err, "session", p.SessionID)
		}
	}
	rows, err := e.store.ActionListAll(ctx, &store.ActionListParams{
		Status: p.Status, Type: p.Type, SessionID: p.SessionID, Project: p.Project, After: after, Limit: limit + 1,
	})
	if err != nil {
		return nil, err
	}
	out := &lt.List[lt.Action]{Data: []lt.Action{}}
	if len(rows) > limit {
		last := rows[limit-1]
		c := encodeActionCursor(last.CreatedAt, last.ID)
		out.NextCursor = &c
		rows = rows[:limit]
	}
	actions, err := decodeDocs[lt.Action](rows)
	if err != nil {
		return nil, err
	}
	out.Data = actions
	return out, nil
}

// GetAction returns a required action by its id alone, in any status: the
// inbox shows it without knowing its session.
func (e *Engine) GetAction(ctx context.Context, actionID string) (*lt.Action, error) {
	if actionID == "" {
		return nil, apierror.Invalid("action_id", "must not be empty")
	}
	row, err := e.store.ActionGetByID(ctx, actionID)
	if err != nil {
		return nil, notFound(err, "action", actionID)
	}
	var a lt.Action
	if err := json.Unmarshal(row.Doc, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func validActionType(t string) bool {
	for _, at := range actionTypes {
		if string(at) == t {
			return true
		}
	}
	return false
}

// actionCursor is the decoded form of an inbox cursor: the position
// (created_at, id) of the last action of the previous page.
type actionCursor struct {
	CreatedAt time.Time `json:"t"`
	ID        string    `json:"id"`
}

func encodeActionCursor(createdAt time.Time, id string) string {
	raw, _ := json.Marshal(actionCursor{CreatedAt: createdAt.UTC(), ID: id}) // a struct of a time and a string always marshals
	return base64.RawURLEncoding.EncodeToString(raw)
}

// decodeActionCursor refuses anything encodeActionCursor did not make, as a
// 400 naming the cursor.
func decodeActionCursor(s string) (*store.DocCursor, error) {
	bad := apierror.Invalid("cursor", "unknown cursor %q: pass the next_cursor of a previous page", s)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c actionCursor
	if err := dec.Decode(&c); err != nil || c.ID == "" || c.CreatedAt.IsZero() {
		return nil, bad
	}
	return &store.DocCursor{CreatedAt: c.CreatedAt, ID: c.ID}, nil
}
