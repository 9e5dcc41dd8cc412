package app

import (
	"context"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListActions implements Service.
func (a *App) ListActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	actions, err := a.eng.ListActions(ctx, sessionID, string(status))
	if err != nil {
		return nil, err
	}
	return list(actions), nil
}

// ListAllActions implements Service.
func (a *App) ListAllActions(ctx context.Context, p lt.ListActionsParams) (*lt.List[lt.Action], error) {
	return a.eng.ListAllActions(ctx, p)
}

// GetAction implements Service.
func (a *App) GetAction(ctx context.Context, actionID string) (*lt.Action, error) {
	return a.eng.GetAction(ctx, actionID)
}

// DecideAction implements Service.
func (a *App) DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error) {
	return a.eng.DecideAction(ctx, sessionID, actionID, d)
}
