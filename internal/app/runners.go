package app

import (
	"context"
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListRunners implements Service: the runners connected to any node (the
// store's runners table) and seen within the runners' stale bound, of
// project (a key of one project: its own; an admin: "" for every
// project), by project then name.
func (a *App) ListRunners(ctx context.Context, project string) (*lt.List[lt.Runner], error) {
	if err := Allow(ctx, "ListRunners"); err != nil {
		return nil, err
	}
	project, err := listProject(ctx, project)
	if err != nil {
		return nil, err
	}
	rows, err := a.store.RunnerList(ctx, project, a.runnerStaleAfter)
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	out := make([]lt.Runner, 0, len(rows))
	for _, r := range rows {
		out = append(out, lt.Runner{
			Name: r.Name, Project: r.Project, Labels: r.Labels, Capacity: r.Capacity, Version: r.Version,
			Protocol: r.Protocol, Node: r.Node, KeyID: r.KeyID, ConnectedAt: r.ConnectedAt, LastSeenAt: r.SeenAt, Sessions: r.Sessions,
		})
	}
	return list(out), nil
}
