package client

import (
	"context"
	"fmt"
	"net/url"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListActions returns the session's required actions, only those with
// status when it is not empty (GET /v1/sessions/{id}/actions?status=).
func (c *Client) ListActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	q := url.Values{}
	setIf(q, "status", string(status))
	l, err := get[lt.List[lt.Action]](ctx, c, c.endpoint(q, "v1", "sessions", sessionID, "actions"))
	if err != nil {
		return nil, fmt.Errorf("list actions of %s: %w", sessionID, err)
	}
	return l, nil
}

// ListTreeActions returns the required actions of a session and of all its
// sub-agents, recursively, ordered by creation time, only those with status
// when it is not empty
// (GET /v1/sessions/{id}/actions?status=&include=subagents). Each action's
// SessionID names the session to decide it on.
func (c *Client) ListTreeActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list tree actions: %w", err)
	}
	q := url.Values{}
	setIf(q, "status", string(status))
	q.Set("include", "subagents")
	l, err := get[lt.List[lt.Action]](ctx, c, c.endpoint(q, "v1", "sessions", sessionID, "actions"))
	if err != nil {
		return nil, fmt.Errorf("list actions of tree %s: %w", sessionID, err)
	}
	return l, nil
}

// DecideAction resolves a required action and returns it resolved
// (POST /v1/sessions/{id}/actions/{action_id}). Which fields of d apply
// depends on the action's type (API.md "Required actions"). Repeating the
// same decision returns the first result; a different decision on a resolved
// action is a conflict (IsConflict).
func (c *Client) DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("decide action: %w", err)
	}
	if err := requireID("actionID", actionID); err != nil {
		return nil, fmt.Errorf("decide action: %w", err)
	}
	if d == nil {
		return nil, fmt.Errorf("decide action %s: decision is nil", actionID)
	}
	a, err := post[lt.Action](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "actions", actionID), d)
	if err != nil {
		return nil, fmt.Errorf("decide action %s of %s: %w", actionID, sessionID, err)
	}
	return a, nil
}
