package app

import (
	"context"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListActions implements Service.
func (a *App) ListActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	if err := Allow(ctx, "ListActions"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	actions, err := a.eng.ListActions(ctx, sessionID, string(status))
	if err != nil {
		return nil, err
	}
	return list(actions), nil
}

// ListAllActions implements Service.
func (a *App) ListAllActions(ctx context.Context, p lt.ListActionsParams) (*lt.List[lt.Action], error) {
	if err := Allow(ctx, "ListAllActions"); err != nil {
		return nil, err
	}
	project, err := listProject(ctx, p.Project)
	if err != nil {
		return nil, err
	}
	p.Project = project
	if p.SessionID != "" {
		if err := a.visibleSession(ctx, p.SessionID); err != nil {
			return nil, err
		}
	}
	return a.eng.ListAllActions(ctx, p)
}

// GetAction implements Service.
func (a *App) GetAction(ctx context.Context, actionID string) (*lt.Action, error) {
	if err := Allow(ctx, "GetAction"); err != nil {
		return nil, err
	}
	act, err := a.eng.GetAction(ctx, actionID)
	if err != nil {
		return nil, err
	}
	// An action is its session's: one of another project is as unknown
	// as an action that never existed (the engine's 404).
	if err := a.seenThrough(ctx, act.SessionID, apierror.NotFound("action %s not found", actionID)); err != nil {
		return nil, err
	}
	return act, nil
}

// DecideAction implements Service.
func (a *App) DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error) {
	if err := Allow(ctx, "DecideAction"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.DecideAction(ctx, sessionID, actionID, d)
}
