package app

import (
	"context"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TaskReport implements Service.
func (a *App) TaskReport(ctx context.Context, p lt.TaskReportParams) (*lt.TaskReport, error) {
	if err := Allow(ctx, "TaskReport"); err != nil {
		return nil, err
	}
	project, err := listProject(ctx, p.Project)
	if err != nil {
		return nil, err
	}
	p.Project = project
	return a.reports.TaskReport(ctx, p)
}

// Ready implements Service.
func (a *App) Ready(ctx context.Context) error { return a.eng.Ready(ctx) }

// ReadyDetails reports the engine's operational facts worth showing with
// readiness (the sandbox that runs tools, and its warning). It is not a use
// case of Service: the HTTP API shows them on /readyz (server.ReadyDetailer).
func (a *App) ReadyDetails() map[string]string { return a.eng.ReadyDetails() }
