package app

import (
	"context"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TaskReport implements Service.
func (a *App) TaskReport(ctx context.Context, p lt.TaskReportParams) (*lt.TaskReport, error) {
	return a.reports.TaskReport(ctx, p)
}

// Ready implements Service.
func (a *App) Ready(ctx context.Context) error { return a.eng.Ready(ctx) }
