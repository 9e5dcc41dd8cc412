package client

import (
	"context"
	"fmt"
	"net/url"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// SessionTrace returns the session's trace: its turns as trees of spans
// (steps, model calls, tool calls, sub-agents) with durations, tokens and
// cost (GET /v1/sessions/{id}/trace). With includeSubagents, each
// sub-agent's own trace is nested under its subagent span.
func (c *Client) SessionTrace(ctx context.Context, id string, includeSubagents bool) (*lt.Trace, error) {
	if err := requireID("id", id); err != nil {
		return nil, fmt.Errorf("get trace: %w", err)
	}
	var q url.Values
	if includeSubagents {
		q = url.Values{"include": {"subagents"}}
	}
	tr, err := get[lt.Trace](ctx, c, c.endpoint(q, "v1", "sessions", id, "trace"))
	if err != nil {
		return nil, fmt.Errorf("get trace of %s: %w", id, err)
	}
	return tr, nil
}
