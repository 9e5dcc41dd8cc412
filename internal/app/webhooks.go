package app

import (
	"context"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// CreateWebhookEndpoint implements Service.
func (a *App) CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error) {
	if err := Allow(ctx, "CreateWebhookEndpoint"); err != nil {
		return nil, err
	}
	return a.webhooks.CreateWebhookEndpoint(ctx, req)
}

// ListWebhookEndpoints implements Service.
func (a *App) ListWebhookEndpoints(ctx context.Context) (*lt.List[lt.WebhookEndpoint], error) {
	if err := Allow(ctx, "ListWebhookEndpoints"); err != nil {
		return nil, err
	}
	eps, err := a.webhooks.ListWebhookEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	return list(eps), nil
}

// DeleteWebhookEndpoint implements Service.
func (a *App) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if err := Allow(ctx, "DeleteWebhookEndpoint"); err != nil {
		return err
	}
	return a.webhooks.DeleteWebhookEndpoint(ctx, id)
}

// ListWebhookDeliveries implements Service.
func (a *App) ListWebhookDeliveries(ctx context.Context, p lt.ListWebhookDeliveriesParams) (*lt.List[lt.WebhookDelivery], error) {
	if err := Allow(ctx, "ListWebhookDeliveries"); err != nil {
		return nil, err
	}
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return nil, apierror.Invalid("limit", "limit must be between 0 (the default page, %d) and %d, got %d", DefaultListLimit, MaxListLimit, p.Limit)
	}
	if p.Limit == 0 {
		p.Limit = DefaultListLimit
	}
	return a.webhooks.ListWebhookDeliveries(ctx, p.Cursor, p.Limit)
}
