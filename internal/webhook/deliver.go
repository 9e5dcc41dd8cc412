package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/httpretry"
	"github.com/longhaul-dev/longhaul/internal/store"
)

// maxRetryAfter caps a receiver's Retry-After, so one answer cannot park a
// delivery for ever.
const maxRetryAfter = 24 * time.Hour

// deliverLoop claims due deliveries and attempts each once, at most conc
// at a time, claiming only as many as it can start at once (a claim runs
// out while its delivery waits for a slot). It sleeps until the next
// delivery is due, the scanner enqueues one, or an attempt ends. When ctx
// ends it waits for the attempts in flight, which end promptly (their
// requests are cancelled with ctx).
func (d *Dispatcher) deliverLoop(ctx context.Context) error {
	done := make(chan struct{}, d.conc)
	inflight := 0
	defer func() {
		for ; inflight > 0; inflight-- {
			<-done
		}
	}()
	for {
		var timer <-chan time.Time
		if free := d.conc - inflight; free > 0 {
			rows, err := d.claimDue(ctx, free)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, store.ErrClosed) {
					return err
				}
				d.log.Warn("webhook claim", "err", err)
				timer = d.clock.After(d.rescan)
			}
			for _, row := range rows {
				inflight++
				go func() {
					defer func() { done <- struct{}{} }()
					if err := d.attempt(ctx, row); err != nil && ctx.Err() == nil {
						d.log.Warn("webhook delivery", "id", row.ID, "err", err)
					}
				}()
			}
			if err == nil && inflight < d.conc {
				if timer, err = d.nextDue(ctx); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.wake:
		case <-timer:
		case <-done:
			inflight--
		}
	}
}

// claimDue claims up to n due deliveries for this dispatcher.
func (d *Dispatcher) claimDue(ctx context.Context, n int) ([]*store.WebhookDeliveryRow, error) {
	now := d.clock.Now()
	return d.st.WebhookClaimDue(ctx, &store.WebhookClaimParams{Owner: d.owner, Now: now, Until: now.Add(d.claimTTL), Limit: n})
}

// nextDue returns a timer that fires when the next pending delivery is due
// (nil: none is pending), or, if the store cannot tell, after the rescan
// interval. Its error is one that stops the dispatcher.
func (d *Dispatcher) nextDue(ctx context.Context) (<-chan time.Time, error) {
	next, err := d.st.WebhookNextDue(ctx)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, store.ErrClosed) {
			return nil, err
		}
		d.log.Warn("webhook next due", "err", err)
		return d.clock.After(d.rescan), nil
	case next != nil:
		return d.afterUntil(*next), nil
	}
	return nil, nil
}

// afterUntil returns a channel that receives once the clock reaches t. The
// clock is read again once the timer is set: a clock that moved past t in
// between (a test's clock advanced by another goroutine, which a timer set
// from the earlier reading would wait for a second time) fires at once.
func (d *Dispatcher) afterUntil(t time.Time) <-chan time.Time {
	timer := d.clock.After(t.Sub(d.clock.Now()))
	if now := d.clock.Now(); !now.Before(t) {
		fired := make(chan time.Time, 1)
		fired <- now
		return fired
	}
	return timer
}

// outcome is what one attempt leads to.
type outcome struct {
	code       int
	err        string
	retryAfter time.Duration
}

// attempt sends one delivery, which this dispatcher has claimed, once and
// records the attempt. An error leaves the claim to run out (or to be
// released by Stop), after which the delivery is due again.
func (d *Dispatcher) attempt(ctx context.Context, row *store.WebhookDeliveryRow) error {
	to, err := d.targetOf(ctx, row)
	if err != nil {
		return fmt.Errorf("deliver %s: %w", row.ID, err)
	}
	n := row.Attempts + 1
	now := d.clock.Now()
	p := &store.WebhookAttemptParams{DeliveryID: row.ID, Now: now,
		Attempt: store.WebhookAttemptRow{Attempt: n, Owner: d.owner, At: now}}
	if !to.enabled {
		// The endpoint was deleted or disabled between the query and now.
		p.Status = store.WebhookDisabled
		p.Attempt.Error = "not sent: the endpoint was deleted or disabled"
		return d.record(ctx, p)
	}
	start := time.Now()
	out := d.send(ctx, row, to.secrets, now.Unix())
	if ctx.Err() != nil {
		// Shutting down: the attempt did not finish, so it is not one.
		// Its claim is released once every attempt has stopped, and the
		// delivery is sent again, with the same id, by the next run or
		// another node.
		return ctx.Err()
	}
	p.Attempt.Duration = time.Since(start)
	p.Attempt.StatusCode = out.code
	p.Attempt.Error = out.err
	switch {
	case out.code >= 200 && out.code < 300:
		p.Status = store.WebhookDelivered
	case out.code == http.StatusGone:
		p.Status = store.WebhookDisabled
		p.DisableTarget = true
		p.TargetSessionID = to.urlSessionID
	case n >= len(d.schedule):
		p.Status = store.WebhookFailed
	default:
		p.Status = store.WebhookPending
		wait := max(d.schedule[n], out.retryAfter)
		next := d.clock.Now().Add(wait)
		p.NextAttemptAt = &next
	}
	return d.record(ctx, p)
}

func (d *Dispatcher) record(ctx context.Context, p *store.WebhookAttemptParams) error {
	err := d.st.WebhookRecordAttempt(ctx, p)
	if errors.Is(err, store.ErrLeaseLost) {
		// The claim ran out before the attempt ended and another claim
		// took the delivery: that claim's attempt is the one recorded
		// (the receiver may see this webhook-id twice, as after a crash).
		d.log.Warn("webhook attempt not recorded: its claim was lost", "id", p.DeliveryID,
			"attempt", p.Attempt.Attempt, "status_code", p.Attempt.StatusCode, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("deliver %s: %w", p.DeliveryID, err)
	}
	d.log.Info("webhook attempt", "id", p.DeliveryID, "attempt", p.Attempt.Attempt,
		"status_code", p.Attempt.StatusCode, "error", p.Attempt.Error, "status", p.Status)
	return nil
}

// deliveryTarget is what an attempt needs of its delivery's target.
type deliveryTarget struct {
	secrets []string
	// enabled is false once the target no longer accepts deliveries.
	enabled bool
	// urlSessionID is, for a delivery to a session's webhook_url, the
	// session whose URL it is: the delivery's own, or its root for a
	// sub-agent's notification. A 410 disables that session's URL.
	urlSessionID string
}

// targetOf returns the signing secrets of the delivery's target and
// whether it still accepts deliveries.
func (d *Dispatcher) targetOf(ctx context.Context, row *store.WebhookDeliveryRow) (deliveryTarget, error) {
	if row.EndpointID == "" {
		id, err := d.urlSessionID(ctx, row)
		if err != nil {
			return deliveryTarget{}, err
		}
		ws, err := d.st.WebhookSessionInit(ctx, id, NewSecret())
		if err != nil {
			return deliveryTarget{}, err
		}
		return deliveryTarget{secrets: []string{ws.Secret}, enabled: ws.DisabledAt == nil, urlSessionID: id}, nil
	}
	ep, err := d.st.WebhookEndpointGet(ctx, row.EndpointID)
	if errors.Is(err, store.ErrNotFound) {
		return deliveryTarget{}, nil
	}
	if err != nil {
		return deliveryTarget{}, err
	}
	return deliveryTarget{secrets: ep.Secrets, enabled: ep.DisabledAt == nil}, nil
}

// send POSTs the signed body and reports the answer.
func (d *Dispatcher) send(ctx context.Context, row *store.WebhookDeliveryRow, secrets []string, ts int64) outcome {
	sig, err := Sign(secrets, row.ID, ts, row.Body)
	if err != nil {
		return outcome{err: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, row.URL, bytes.NewReader(row.Body))
	if err != nil {
		return outcome{err: "build request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "longhaul-webhooks")
	req.Header.Set("webhook-id", row.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := d.client.Do(req)
	if err != nil {
		return outcome{err: err.Error()}
	}
	defer func() { _ = resp.Body.Close() }()
	// Drain a little so the connection can be reused; the body is not used.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	out := outcome{code: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), d.clock.Now())}
	if out.code < 200 || out.code >= 300 {
		out.err = "HTTP " + strconv.Itoa(out.code)
	}
	return out
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or
// invalid.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && secs >= 1e9 {
		return maxRetryAfter // an absurd wait is capped, not ignored
	}
	return min(httpretry.Value(v, now), maxRetryAfter)
}
