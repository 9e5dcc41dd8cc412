package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListAuditParams filters and pages ListAudit.
type ListAuditParams = lt.ListAuditParams

// ListAudit returns a page of the audit log, oldest first (GET /v1/audit,
// admin only): every state-changing request and every refused one. Pass
// the page's NextCursor as Cursor for the next.
func (c *Client) ListAudit(ctx context.Context, p ListAuditParams) (*lt.List[lt.AuditEntry], error) {
	if err := checkLimit("ListAuditParams.Limit", p.Limit); err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	q := url.Values{}
	setIf(q, "since", p.Since)
	setIf(q, "actor", p.Actor)
	setIf(q, "cursor", p.Cursor)
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	l, err := get[lt.List[lt.AuditEntry]](ctx, c, c.endpoint(q, "v1", "audit"))
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	return l, nil
}
