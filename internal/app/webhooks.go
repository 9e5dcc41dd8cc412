package app

import (
	"context"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/engine"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// CreateWebhookEndpoint implements Service: the endpoint is in the
// caller's project (an admin's: req.Project, default lt.DefaultProject)
// and hears of that project's sessions only.
func (a *App) CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error) {
	if err := Allow(ctx, "CreateWebhookEndpoint"); err != nil {
		return nil, err
	}
	if req != nil {
		project, err := creationProject(ctx, req.Project)
		if err != nil {
			return nil, err
		}
		in := *req
		in.Project = project
		req = &in
	}
	// A request run again after its first run's answer was lost names
	// the endpoint as that run did (WithCreationSeed).
	seed, seeded, err := engine.CreationSeed(ctx)
	if err != nil {
		return nil, err
	}
	id := ""
	if seeded {
		id = "whe_" + seed
	}
	return a.webhooks.CreateWebhookEndpointNamed(ctx, id, req)
}

// ListWebhookEndpoints implements Service: the caller's project's
// endpoints (an admin's: project's, or every project's for "").
func (a *App) ListWebhookEndpoints(ctx context.Context, project string) (*lt.List[lt.WebhookEndpoint], error) {
	if err := Allow(ctx, "ListWebhookEndpoints"); err != nil {
		return nil, err
	}
	project, err := listProject(ctx, project)
	if err != nil {
		return nil, err
	}
	eps, err := a.webhooks.ListWebhookEndpoints(ctx, project)
	if err != nil {
		return nil, err
	}
	return list(eps), nil
}

// DeleteWebhookEndpoint implements Service: another project's endpoint
// is not found.
func (a *App) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if err := Allow(ctx, "DeleteWebhookEndpoint"); err != nil {
		return err
	}
	return a.webhooks.DeleteWebhookEndpoint(ctx, visibleProject(ctx), id)
}

// ListWebhookDeliveries implements Service: the deliveries of the caller's
// project's sessions (an admin's: p.Project's, or every project's).
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
	project, err := listProject(ctx, p.Project)
	if err != nil {
		return nil, err
	}
	return a.webhooks.ListWebhookDeliveries(ctx, project, p.Cursor, p.Limit)
}
