package app

import (
	"context"
	"errors"
	"net/http"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// PutAgent implements Service: the agent goes into the caller's project
// (an admin's: req.Project, default lt.DefaultProject).
func (a *App) PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error) {
	if err := Allow(ctx, "PutAgent"); err != nil {
		return nil, err
	}
	req, err := inAgentProject(ctx, req)
	if err != nil {
		return nil, err
	}
	return a.eng.PutAgent(ctx, req)
}

// inAgentProject returns a copy of req in the project it writes to.
func inAgentProject(ctx context.Context, req *lt.PutAgentRequest) (*lt.PutAgentRequest, error) {
	if req == nil {
		return nil, apierror.Invalid("", "the agent definition is missing")
	}
	project, err := creationProject(ctx, req.Project)
	if err != nil {
		return nil, err
	}
	out := *req
	out.Project = project
	return &out, nil
}

// EnsureAgent implements Service: what a program that starts again and
// again wants, a version added only when the spec changed (compared as
// lt.SameAgentSpec, so key order and spacing do not count). The project
// is PutAgent's.
func (a *App) EnsureAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, bool, error) {
	if err := Allow(ctx, "EnsureAgent"); err != nil {
		return nil, false, err
	}
	req, err := inAgentProject(ctx, req)
	if err != nil {
		return nil, false, err
	}
	latest, err := a.eng.GetAgent(ctx, req.Project, req.Name, 0)
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

// ListAgents implements Service: the caller's project's agents (an
// admin's: project's, or every project's for "").
func (a *App) ListAgents(ctx context.Context, project string) (*lt.List[lt.Agent], error) {
	if err := Allow(ctx, "ListAgents"); err != nil {
		return nil, err
	}
	project, err := listProject(ctx, project)
	if err != nil {
		return nil, err
	}
	agents, err := a.eng.ListAgents(ctx, project)
	if err != nil {
		return nil, err
	}
	return list(agents), nil
}

// GetAgent implements Service: an agent of the caller's project (an
// admin's: of project, default lt.DefaultProject); another project's is
// not found.
func (a *App) GetAgent(ctx context.Context, project, name string, version int) (*lt.Agent, error) {
	if err := Allow(ctx, "GetAgent"); err != nil {
		return nil, err
	}
	project, err := creationProject(ctx, project)
	if err != nil {
		return nil, err
	}
	return a.eng.GetAgent(ctx, project, name, version)
}

// ListAgentVersions implements Service: every version of an agent of the
// caller's project (GetAgent's), the latest first, in one store read (a
// config file registers a version at each change, so an agent may have
// hundreds).
func (a *App) ListAgentVersions(ctx context.Context, project, name string) (*lt.List[lt.Agent], error) {
	if err := Allow(ctx, "ListAgentVersions"); err != nil {
		return nil, err
	}
	project, err := creationProject(ctx, project)
	if err != nil {
		return nil, err
	}
	versions, err := a.eng.ListAgentVersions(ctx, project, name)
	if err != nil {
		return nil, err
	}
	return list(versions), nil
}
