package app

import (
	"context"
	"errors"
	"net/http"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// PutAgent implements Service.
func (a *App) PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error) {
	if err := Allow(ctx, "PutAgent"); err != nil {
		return nil, err
	}
	return a.eng.PutAgent(ctx, req)
}

// EnsureAgent implements Service: what a program that starts again and
// again wants, a version added only when the spec changed (compared as
// lt.SameAgentSpec, so key order and spacing do not count).
func (a *App) EnsureAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, bool, error) {
	if err := Allow(ctx, "EnsureAgent"); err != nil {
		return nil, false, err
	}
	if req == nil {
		return nil, false, apierror.Invalid("", "the agent definition is missing")
	}
	latest, err := a.eng.GetAgent(ctx, req.Name, 0)
	var ae *apierror.Error
	switch {
	case err == nil:
		same, err := lt.SameAgentSpec(&latest.Spec, &req.Spec)
		if err != nil {
			return nil, false, err
		}
		if same {
			return latest, false, nil
		}
	case !errors.As(err, &ae) || ae.Status != http.StatusNotFound:
		return nil, false, err
	}
	agent, err := a.eng.PutAgent(ctx, req)
	if err != nil {
		return nil, false, err
	}
	return agent, true, nil
}

// ListAgents implements Service.
func (a *App) ListAgents(ctx context.Context) (*lt.List[lt.Agent], error) {
	if err := Allow(ctx, "ListAgents"); err != nil {
		return nil, err
	}
	agents, err := a.eng.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	return list(agents), nil
}

// GetAgent implements Service.
func (a *App) GetAgent(ctx context.Context, name string, version int) (*lt.Agent, error) {
	if err := Allow(ctx, "GetAgent"); err != nil {
		return nil, err
	}
	return a.eng.GetAgent(ctx, name, version)
}
