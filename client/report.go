package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TaskReport returns one page of the task report of a window, with the
// totals and the time series of the whole window
// (GET /v1/reports/tasks). To read every page, give the next pages the
// first page's Since and Until (RFC 3339), so the window stays put while
// new tasks arrive, and the previous page's NextCursor.
func (c *Client) TaskReport(ctx context.Context, p lt.TaskReportParams) (*lt.TaskReport, error) {
	if err := checkLimit("TaskReportParams.Limit", p.Limit); err != nil {
		return nil, fmt.Errorf("task report: %w", err)
	}
	q := url.Values{}
	setIf(q, "since", p.Since)
	setIf(q, "until", p.Until)
	setIf(q, "agent", p.Agent)
	setIf(q, "project", p.Project)
	setIf(q, "bucket", p.Bucket)
	setIf(q, "cursor", p.Cursor)
	if p.IncludeSubagents {
		q.Set("include_subagents", "true")
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	r, err := get[lt.TaskReport](ctx, c, c.endpoint(q, "v1", "reports", "tasks"))
	if err != nil {
		return nil, fmt.Errorf("task report: %w", err)
	}
	return r, nil
}
