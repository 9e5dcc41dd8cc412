package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// PutAgent creates an agent, or adds a new version of it (POST /v1/agents).
func (c *Client) PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error) {
	if req == nil {
		return nil, fmt.Errorf("put agent: req is nil")
	}
	a, err := post[lt.Agent](ctx, c, c.endpoint(nil, "v1", "agents"), req)
	if err != nil {
		return nil, fmt.Errorf("put agent %s: %w", req.Name, err)
	}
	return a, nil
}

// ListAgents returns the latest version of every agent of project
// (GET /v1/agents?project=): a key of one project lists its own; an
// admin's lists every project's for "".
func (c *Client) ListAgents(ctx context.Context, project string) (*lt.List[lt.Agent], error) {
	q := url.Values{}
	setIf(q, "project", project)
	l, err := get[lt.List[lt.Agent]](ctx, c, c.endpoint(q, "v1", "agents"))
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return l, nil
}

// GetAgent returns one version of the agent name of project, the latest
// when version is 0 (GET /v1/agents/{name}?version=N&project=): a key of
// one project reads its own; an admin's the default project for "".
func (c *Client) GetAgent(ctx context.Context, project, name string, version int) (*lt.Agent, error) {
	if err := requireID("name", name); err != nil {
		return nil, fmt.Errorf("get agent: %w", err)
	}
	if version < 0 {
		return nil, fmt.Errorf("get agent %s: version %d is negative", name, version)
	}
	q := url.Values{}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	setIf(q, "project", project)
	a, err := get[lt.Agent](ctx, c, c.endpoint(q, "v1", "agents", name))
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, err)
	}
	return a, nil
}

// ListAgentVersions returns every version of the agent name of project,
// the latest first (GET /v1/agents/{name}/versions?project=; the project
// as GetAgent's).
func (c *Client) ListAgentVersions(ctx context.Context, project, name string) (*lt.List[lt.Agent], error) {
	if err := requireID("name", name); err != nil {
		return nil, fmt.Errorf("list agent versions: %w", err)
	}
	q := url.Values{}
	setIf(q, "project", project)
	l, err := get[lt.List[lt.Agent]](ctx, c, c.endpoint(q, "v1", "agents", name, "versions"))
	if err != nil {
		return nil, fmt.Errorf("list versions of agent %s: %w", name, err)
	}
	return l, nil
}

// EnsureAgent defines an agent the way a program that starts again and
// again wants it: it creates the agent, or adds a version only when req's
// spec differs from the latest version's (lt.SameAgentSpec: compared as
// canonical JSON, the rule the server's and the library's EnsureAgent
// follow). It returns the latest version afterwards and whether it wrote
// one. An error of the GetAgent or PutAgent it makes is returned as that
// call's, so it names the step that failed.
func (c *Client) EnsureAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, bool, error) {
	if req == nil {
		return nil, false, fmt.Errorf("ensure agent: req is nil")
	}
	latest, err := c.GetAgent(ctx, req.Project, req.Name, 0)
	switch {
	case err == nil:
		same, err := lt.SameAgentSpec(&latest.Spec, &req.Spec)
		if err != nil {
			return nil, false, fmt.Errorf("ensure agent %s: %w", req.Name, err)
		}
		if same {
			return latest, false, nil
		}
	case !IsNotFound(err):
		return nil, false, err
	}
	a, err := c.PutAgent(ctx, req)
	if err != nil {
		return nil, false, err
	}
	return a, true, nil
}
