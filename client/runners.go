package client

import (
	"context"
	"fmt"
	"net/url"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListRunners returns the runners (self-managed environments) connected
// to any node of the server (GET /v1/runners?project=): a key of one
// project lists its own; an admin's lists every project's for "".
func (c *Client) ListRunners(ctx context.Context, project string) (*lt.List[lt.Runner], error) {
	q := url.Values{}
	setIf(q, "project", project)
	l, err := get[lt.List[lt.Runner]](ctx, c, c.endpoint(q, "v1", "runners"))
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	return l, nil
}
