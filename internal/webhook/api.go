package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Bounds on endpoint input.
const (
	maxURLLength      = 2048
	maxDeliveriesPage = 500
)

// API serves the webhook use cases of the application service
// (internal/app). Errors a client caused are *apierror.Error values.
type API struct{ d *Dispatcher }

// NewAPI returns the API of d.
func NewAPI(d *Dispatcher) *API { return &API{d: d} }

// CreateWebhookEndpoint creates an endpoint of req.Project ("": the
// default project; the application service decides which project a
// caller may name) and returns it with its secret, which no later
// response shows.
func (a *API) CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error) {
	return a.CreateWebhookEndpointNamed(ctx, "", req)
}

// CreateWebhookEndpointNamed is CreateWebhookEndpoint with the endpoint's
// id given ("": a new one): a request run again (its Idempotency-Key's
// first run died before answering) names the endpoint as the first run
// did, and is answered with the endpoint that run made, if it did, secret
// included, rather than making a second one.
func (a *API) CreateWebhookEndpointNamed(ctx context.Context, id string, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error) {
	named := id != ""
	if named {
		row, err := a.d.st.WebhookEndpointGet(ctx, id)
		switch {
		case err == nil:
			return endpointMade(row), nil
		case !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("create webhook endpoint: %w", err)
		}
	}
	if req == nil {
		return nil, apierror.Invalid("", "request body is empty: send a JSON object")
	}
	project := req.Project
	if project == "" {
		project = lt.DefaultProject
	}
	if err := a.CheckTarget("url", req.URL); err != nil {
		return nil, err
	}
	events := []string{}
	for i, e := range req.Events {
		if !slices.Contains(lt.WebhookEventTypes, e) {
			return nil, apierror.Invalid(fmt.Sprintf("events[%d]", i), "events[%d] must be one of %s, got %q",
				i, strings.Join(lt.WebhookEventTypes, ", "), e)
		}
		if !slices.Contains(events, e) {
			events = append(events, e)
		}
	}
	if id == "" {
		var b [12]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		id = "whe_" + hex.EncodeToString(b[:])
	}
	row := &store.WebhookEndpointRow{
		ID: id, Project: project, URL: req.URL, Events: events,
		Secrets: []string{NewSecret()}, CreatedAt: a.d.clock.Now().UTC(),
	}
	if err := a.d.st.WebhookEndpointCreate(ctx, row); err != nil {
		if named && errors.Is(err, store.ErrConflict) {
			// Made by a run of the same request that overlapped this one:
			// answered with it, or, while its write is not readable yet
			// (SQLite answers a conflict before the batch commits), a 503
			// to retry, never an error that frees the key.
			made, err := a.d.st.WebhookEndpointGet(ctx, id)
			if err != nil {
				return nil, apierror.Unavailable("webhook endpoint %s is being made by another run of this request: retry it", id)
			}
			return endpointMade(made), nil
		}
		return nil, fmt.Errorf("create webhook endpoint: %w", err)
	}
	return endpointMade(row), nil
}

// endpointMade is the answer to the creation of r: the endpoint with its
// newest secret, which no later answer shows.
func endpointMade(r *store.WebhookEndpointRow) *lt.WebhookEndpoint {
	ep := endpointWire(r)
	if len(r.Secrets) > 0 {
		ep.Secret = r.Secrets[0]
	}
	return &ep
}

// CheckURL validates a webhook URL: absolute http or https with a host, no
// user info and not too long. field names it in the error (e.g.
// "webhook_url" when the engine checks a session's).
func CheckURL(field, raw string) error {
	if raw == "" {
		return apierror.Invalid(field, "%s is required", field)
	}
	if len(raw) > maxURLLength {
		return apierror.Invalid(field, "%s is longer than %d bytes", field, maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return apierror.Invalid(field, "%s is not a valid URL", field)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return apierror.Invalid(field, "%s must be an absolute http or https URL", field)
	}
	if u.Host == "" || u.Hostname() == "" {
		return apierror.Invalid(field, "%s must have a host", field)
	}
	if u.User != nil {
		return apierror.Invalid(field, "%s must not contain user info", field)
	}
	return nil
}

// CheckTarget is CheckURL, then the delivery policy's verdict on what it
// can tell without a lookup: a URL that every delivery would be refused
// (a port not allowed, a private or loopback address, an invalid name) is
// refused when it is configured, with the rule, rather than accepted and
// then failed at every attempt. A name is not resolved here: what it
// resolves to is checked at each delivery.
func (a *API) CheckTarget(field, raw string) error {
	if err := CheckURL(field, raw); err != nil {
		return err
	}
	u, _ := url.Parse(raw) // CheckURL parsed it
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return apierror.Invalid(field, "%s has an invalid port %q", field, p)
		}
		port = n
	}
	var refused *egress.RefusedError
	if err := a.d.pol.Precheck(u.Hostname(), port); errors.As(err, &refused) {
		return apierror.Invalid(field, "%s would never be delivered to: %s (webhook deliveries go to public addresses, on the ports the server allows)", field, refused.Reason)
	}
	return nil
}

func endpointWire(r *store.WebhookEndpointRow) lt.WebhookEndpoint {
	return lt.WebhookEndpoint{ID: r.ID, Project: r.Project, URL: r.URL, Events: slices.Clone(r.Events),
		Disabled: r.DisabledAt != nil, DisabledAt: r.DisabledAt, CreatedAt: r.CreatedAt}
}

// SessionWebhookSecret returns the signing secret of a session's own
// webhook_url, creating it on first use.
func (a *API) SessionWebhookSecret(ctx context.Context, sessionID string) (string, error) {
	return a.d.SessionSecret(ctx, sessionID)
}

// ListWebhookEndpoints returns every endpoint of project ("": of every
// project), oldest first, without secrets.
func (a *API) ListWebhookEndpoints(ctx context.Context, project string) ([]lt.WebhookEndpoint, error) {
	rows, err := a.d.st.WebhookEndpointList(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	out := make([]lt.WebhookEndpoint, 0, len(rows))
	for _, r := range rows {
		out = append(out, endpointWire(r))
	}
	return out, nil
}

// DeleteWebhookEndpoint removes an endpoint of project ("": of any
// project); one there is not, or one of another project, is a 404. Its
// pending deliveries are not sent.
func (a *API) DeleteWebhookEndpoint(ctx context.Context, project, id string) error {
	if project != "" {
		// An endpoint never changes project, so reading it first cannot
		// let another project's endpoint through.
		ep, err := a.d.st.WebhookEndpointGet(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && ep.Project != project) {
			return apierror.NotFound("webhook endpoint %q not found", id)
		}
		if err != nil {
			return fmt.Errorf("delete webhook endpoint: %w", err)
		}
	}
	err := a.d.st.WebhookEndpointDelete(ctx, id, a.d.clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return apierror.NotFound("webhook endpoint %q not found", id)
	}
	if err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", err)
	}
	return nil
}

// ListWebhookDeliveries pages the deliveries of the sessions of project
// ("": of every project) newest first, each with its attempts. cursor is
// the previous page's next_cursor ("" for the first); limit is 1..500.
func (a *API) ListWebhookDeliveries(ctx context.Context, project, cursor string, limit int) (*lt.List[lt.WebhookDelivery], error) {
	if limit < 1 || limit > maxDeliveriesPage {
		return nil, apierror.Invalid("limit", "limit must be between 1 and %d, got %d", maxDeliveriesPage, limit)
	}
	var before int64
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n <= 0 {
			return nil, apierror.Invalid("cursor", "cursor is not one this server returned")
		}
		before = n
	}
	rows, err := a.d.st.WebhookDeliveryList(ctx, &store.WebhookDeliveryListParams{BeforePos: before, Limit: limit, Project: project})
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	out := &lt.List[lt.WebhookDelivery]{Data: make([]lt.WebhookDelivery, 0, len(rows))}
	for _, r := range rows {
		w := lt.WebhookDelivery{ID: r.ID, EndpointID: r.EndpointID, SessionID: r.SessionID, URL: r.URL,
			Type: r.Type, EventSeq: r.EventSeq, Status: r.Status, NextAttemptAt: r.NextAttemptAt,
			CreatedAt: r.CreatedAt, Attempts: make([]lt.WebhookDeliveryAttempt, 0, len(r.AttemptList))}
		for _, at := range r.AttemptList {
			w.Attempts = append(w.Attempts, lt.WebhookDeliveryAttempt{Attempt: at.Attempt, At: at.At,
				StatusCode: at.StatusCode, Error: at.Error, DurationMS: at.Duration.Milliseconds()})
		}
		out.Data = append(out.Data, w)
	}
	if len(rows) == limit {
		next := strconv.FormatInt(rows[len(rows)-1].Pos, 10)
		out.NextCursor = &next
	}
	return out, nil
}
