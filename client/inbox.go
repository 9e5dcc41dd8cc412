package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListAllActions returns one page of the inbox: required actions across
// sessions, oldest first (GET /v1/actions?project=&status=&type=&session_id=). Pass
// the page's NextCursor as p.Cursor for the next one; AllActions follows
// the cursors for you.
func (c *Client) ListAllActions(ctx context.Context, p lt.ListActionsParams) (*lt.List[lt.Action], error) {
	if err := checkLimit("ListActionsParams.Limit", p.Limit); err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	q := url.Values{}
	setIf(q, "status", p.Status)
	setIf(q, "type", p.Type)
	setIf(q, "session_id", p.SessionID)
	setIf(q, "project", p.Project)
	setIf(q, "cursor", p.Cursor)
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	l, err := get[lt.List[lt.Action]](ctx, c, c.endpoint(q, "v1", "actions"))
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return l, nil
}

// AllActions yields every action that p's filters select, oldest first,
// reading pages of p.Limit (0: the server's default) from p.Cursor on. For
// the inbox of pending actions:
//
//	for a, err := range c.AllActions(ctx, lt.ListActionsParams{Status: "pending"}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(a.ID, a.Summary)
//	}
//
// The error is non-nil only once, as the last value. Breaking out of the
// loop stops reading pages.
func (c *Client) AllActions(ctx context.Context, p lt.ListActionsParams) iter.Seq2[lt.Action, error] {
	return Pages(p.Cursor, func(cursor string) (*lt.List[lt.Action], error) {
		p.Cursor = cursor
		return c.ListAllActions(ctx, p)
	})
}

// GetAction returns a required action by its id alone, in any status
// (GET /v1/actions/{action_id}). Its SessionID says where to decide it
// (DecideAction).
func (c *Client) GetAction(ctx context.Context, actionID string) (*lt.Action, error) {
	if err := requireID("actionID", actionID); err != nil {
		return nil, fmt.Errorf("get action: %w", err)
	}
	a, err := get[lt.Action](ctx, c, c.endpoint(nil, "v1", "actions", actionID))
	if err != nil {
		return nil, fmt.Errorf("get action %s: %w", actionID, err)
	}
	return a, nil
}

// UpdateBudget replaces the limits that p sets and keeps the others
// (PATCH /v1/sessions/{id}/budget); a limit set to 0 is removed. It returns
// the session with its new budget. Retrying it is safe: applying the same
// patch twice gives the same budget.
func (c *Client) UpdateBudget(ctx context.Context, sessionID string, p *lt.BudgetPatch) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("update budget: %w", err)
	}
	if p == nil {
		return nil, fmt.Errorf("update budget of %s: patch is nil", sessionID)
	}
	out := new(lt.Session)
	u := c.endpoint(nil, "v1", "sessions", sessionID, "budget")
	if err := c.doJSON(ctx, &call{method: http.MethodPatch, url: u, body: p}, out); err != nil {
		return nil, fmt.Errorf("update budget of %s: %w", sessionID, err)
	}
	return out, nil
}
