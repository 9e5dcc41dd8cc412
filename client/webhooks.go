package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// CreateWebhookEndpoint registers a server-wide webhook endpoint
// (POST /v1/webhooks/endpoints). The returned endpoint's Secret
// ("whsec_...") verifies the notifications' signatures; this response is
// the only one that shows it, so keep it.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error) {
	if req == nil {
		return nil, fmt.Errorf("create webhook endpoint: req is nil")
	}
	ep, err := post[lt.WebhookEndpoint](ctx, c, c.endpoint(nil, "v1", "webhooks", "endpoints"), req)
	if err != nil {
		return nil, fmt.Errorf("create webhook endpoint: %w", err)
	}
	return ep, nil
}

// ListWebhookEndpoints returns the webhook endpoints of project, without
// secrets (GET /v1/webhooks/endpoints?project=): a key of one project
// lists its own; an admin's lists every project's for "".
func (c *Client) ListWebhookEndpoints(ctx context.Context, project string) (*lt.List[lt.WebhookEndpoint], error) {
	q := url.Values{}
	setIf(q, "project", project)
	l, err := get[lt.List[lt.WebhookEndpoint]](ctx, c, c.endpoint(q, "v1", "webhooks", "endpoints"))
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return l, nil
}

// DeleteWebhookEndpoint removes a webhook endpoint
// (DELETE /v1/webhooks/endpoints/{id}); an unknown id is an *APIError with
// status 404 (IsNotFound). Retrying it after a lost response may therefore
// end in a 404 for an endpoint the first attempt removed.
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if err := requireID("id", id); err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", err)
	}
	u := c.endpoint(nil, "v1", "webhooks", "endpoints", id)
	if err := c.doJSON(ctx, &call{method: http.MethodDelete, url: u}, nil); err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	return nil
}

// ListWebhookDeliveriesParams pages GET /v1/webhooks/deliveries. Zero
// fields are not sent: the first page, the server's default page size.
type ListWebhookDeliveriesParams = lt.ListWebhookDeliveriesParams

// ListWebhookDeliveries returns one page of webhook deliveries, newest
// first, each with its attempts (GET /v1/webhooks/deliveries). Pass the
// page's NextCursor as p.Cursor for the next one; AllWebhookDeliveries
// follows the cursors for you.
func (c *Client) ListWebhookDeliveries(ctx context.Context, p ListWebhookDeliveriesParams) (*lt.List[lt.WebhookDelivery], error) {
	if err := checkLimit("ListWebhookDeliveriesParams.Limit", p.Limit); err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	q := url.Values{}
	setIf(q, "cursor", p.Cursor)
	setIf(q, "project", p.Project)
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	l, err := get[lt.List[lt.WebhookDelivery]](ctx, c, c.endpoint(q, "v1", "webhooks", "deliveries"))
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	return l, nil
}

// AllWebhookDeliveries yields every webhook delivery from p.Cursor on,
// newest first, reading pages of p.Limit (0: the server's default). The
// error is non-nil only once, as the last value. Breaking out of the loop
// stops reading pages.
func (c *Client) AllWebhookDeliveries(ctx context.Context, p ListWebhookDeliveriesParams) iter.Seq2[lt.WebhookDelivery, error] {
	return Pages(p.Cursor, func(cursor string) (*lt.List[lt.WebhookDelivery], error) {
		p.Cursor = cursor
		return c.ListWebhookDeliveries(ctx, p)
	})
}
