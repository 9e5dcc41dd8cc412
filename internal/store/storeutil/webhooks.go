package storeutil

import (
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// The checks of the outgoing webhooks' rows and parameters.

// WebhookEndpointCreate checks the row of Store.WebhookEndpointCreate. Its
// errors carry the operation ("create webhook endpoint", with the id once
// that is known good), as the drivers return them unwrapped.
func (c Checks) WebhookEndpointCreate(row *store.WebhookEndpointRow) error {
	if row == nil {
		return errors.New("create webhook endpoint: row is nil")
	}
	if err := c.ID("id", row.ID); err != nil {
		return fmt.Errorf("create webhook endpoint: %w", err)
	}
	if err := c.webhookEndpoint(row); err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", row.ID, err)
	}
	return nil
}

func (c Checks) webhookEndpoint(row *store.WebhookEndpointRow) error {
	if err := c.ID("project", row.Project); err != nil {
		return err
	}
	if err := c.ID("url", row.URL); err != nil {
		return err
	}
	if len(row.Secrets) == 0 {
		return errors.New("secrets is empty")
	}
	for i, v := range row.Secrets {
		if err := c.ID(fmt.Sprintf("secrets[%d]", i), v); err != nil {
			return err
		}
	}
	for i, v := range row.Events {
		if err := c.Text(fmt.Sprintf("events[%d]", i), v); err != nil {
			return err
		}
	}
	return c.Time("created_at", row.CreatedAt)
}

// WebhookDelivery checks a delivery row of Store.WebhookEnqueue.
func (c Checks) WebhookDelivery(r *store.WebhookDeliveryRow) error {
	if r == nil {
		return errors.New("row is nil")
	}
	for _, f := range []struct{ name, v string }{{"id", r.ID}, {"project", r.Project}, {"session_id", r.SessionID}, {"url", r.URL}, {"type", r.Type}, {"status", r.Status}} {
		if err := c.ID(f.name, f.v); err != nil {
			return err
		}
	}
	if err := c.Text("endpoint_id", r.EndpointID); err != nil {
		return err
	}
	if len(r.Body) == 0 {
		return errors.New("body is empty")
	}
	if r.NextAttemptAt != nil {
		if err := c.Time("next_attempt_at", *r.NextAttemptAt); err != nil {
			return err
		}
	}
	if err := c.Time("created_at", r.CreatedAt); err != nil {
		return err
	}
	return c.Time("updated_at", r.UpdatedAt)
}

// WebhookClaim checks the parameters of Store.WebhookClaimDue. Until must be
// after now as stored (at microsecond precision), so that a claim never
// ends as it starts.
func (c Checks) WebhookClaim(p *store.WebhookClaimParams) error {
	if p == nil {
		return errors.New("params are nil")
	}
	// As stored: at microsecond precision.
	endsAfter := p.Until.UnixMicro() > p.Now.UnixMicro()
	return c.claim(p.Owner, p.Now, "until", p.Until, endsAfter, p.Limit, MaxWebhookPage)
}

// ClaimHeld refuses an attempt that was not made under the delivery's
// current claim: claimed by someone else (or by nobody, once the claim's
// attempt was recorded or the claim released), or for another attempt
// number (the owner's own later claim took it).
func ClaimHeld(claimedBy string, attempts int, a store.WebhookAttemptRow) error {
	if claimedBy != a.Owner {
		if claimedBy == "" {
			return fmt.Errorf("attempt %d by %s: the delivery is not claimed: %w", a.Attempt, a.Owner, store.ErrLeaseLost)
		}
		return fmt.Errorf("attempt %d by %s: the delivery is claimed by %s: %w", a.Attempt, a.Owner, claimedBy, store.ErrLeaseLost)
	}
	if a.Attempt != attempts+1 {
		return fmt.Errorf("attempt %d by %s: the delivery's claim is for attempt %d: %w", a.Attempt, a.Owner, attempts+1, store.ErrLeaseLost)
	}
	return nil
}

// WebhookPage applies the default (50) and the maximum of a page of
// WebhookDue or WebhookDeliveryList.
func (Checks) WebhookPage(limit int) (int, error) {
	switch {
	case limit == 0:
		return 50, nil
	case limit < 0 || limit > MaxWebhookPage:
		return 0, fmt.Errorf("limit must be between 1 and %d, got %d", MaxWebhookPage, limit)
	}
	return limit, nil
}

// WebhookAttempt checks the parameters of Store.WebhookRecordAttempt. Its
// errors carry the operation ("record webhook attempt", with the delivery's
// id once that is known good), as the drivers return them unwrapped.
func (c Checks) WebhookAttempt(p *store.WebhookAttemptParams) error {
	if p == nil {
		return errors.New("record webhook attempt: params is nil")
	}
	if err := c.ID("delivery_id", p.DeliveryID); err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	switch p.Status {
	case store.WebhookPending, store.WebhookDelivered, store.WebhookFailed, store.WebhookDisabled:
	default:
		return fmt.Errorf("record webhook attempt %s: unknown status %q", p.DeliveryID, p.Status)
	}
	if p.Status == store.WebhookPending && p.NextAttemptAt == nil {
		return fmt.Errorf("record webhook attempt %s: a pending delivery needs next_attempt_at", p.DeliveryID)
	}
	if err := c.ID("attempt.owner", p.Attempt.Owner); err != nil {
		return fmt.Errorf("record webhook attempt %s: %w", p.DeliveryID, err)
	}
	if err := c.Text("target_session_id", p.TargetSessionID); err != nil {
		return fmt.Errorf("record webhook attempt %s: %w", p.DeliveryID, err)
	}
	if p.Attempt.Attempt < 1 {
		return fmt.Errorf("record webhook attempt %s: attempt.attempt must be at least 1, got %d", p.DeliveryID, p.Attempt.Attempt)
	}
	if err := c.Time("attempt.at", p.Attempt.At); err != nil {
		return fmt.Errorf("record webhook attempt %s: %w", p.DeliveryID, err)
	}
	if err := c.Text("attempt.error", p.Attempt.Error); err != nil {
		return fmt.Errorf("record webhook attempt %s: %w", p.DeliveryID, err)
	}
	if err := c.Time("now", p.Now); err != nil {
		return fmt.Errorf("record webhook attempt %s: %w", p.DeliveryID, err)
	}
	return nil
}
