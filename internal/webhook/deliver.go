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
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/httpretry"
	"github.com/longhaul-dev/longhaul/internal/store"
)

// maxRetryAfter caps a receiver's Retry-After, so one answer cannot park a
// delivery for ever.
const maxRetryAfter = 24 * time.Hour

// deliverLoop sends due deliveries, then sleeps until the next one is due or
// the scanner enqueues one.
func (d *Dispatcher) deliverLoop(ctx context.Context) error {
	for {
		n, err := d.deliverDue(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, store.ErrClosed) {
				return err
			}
			d.log.Warn("webhook delivery", "err", err)
		}
		if n > 0 && err == nil {
			continue
		}
		var timer <-chan time.Time
		next, err := d.st.WebhookNextDue(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, store.ErrClosed) {
				return err
			}
			d.log.Warn("webhook next due", "err", err)
			timer = d.clock.After(d.rescan)
		case next != nil:
			timer = d.clock.After(next.Sub(d.clock.Now()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.wake:
		case <-timer:
		}
	}
}

// deliverDue attempts one page of due deliveries, at most conc at a time,
// and returns how many it attempted.
func (d *Dispatcher) deliverDue(ctx context.Context) (int, error) {
	due, err := d.st.WebhookDue(ctx, d.clock.Now(), 64)
	if err != nil {
		return 0, err
	}
	sem := make(chan struct{}, d.conc)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, row := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := d.attempt(ctx, row); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return len(due), errors.Join(errs...)
}

// outcome is what one attempt leads to.
type outcome struct {
	code       int
	err        string
	retryAfter time.Duration
}

// attempt sends one delivery once and records the attempt.
func (d *Dispatcher) attempt(ctx context.Context, row *store.WebhookDeliveryRow) error {
	secrets, ok, err := d.secrets(ctx, row)
	if err != nil {
		return fmt.Errorf("deliver %s: %w", row.ID, err)
	}
	n := row.Attempts + 1
	now := d.clock.Now()
	p := &store.WebhookAttemptParams{DeliveryID: row.ID, Now: now,
		Attempt: store.WebhookAttemptRow{Attempt: n, At: now}}
	if !ok {
		// The endpoint was deleted or disabled between the query and now.
		p.Status = store.WebhookDisabled
		p.Attempt.Error = "not sent: the endpoint was deleted or disabled"
		return d.record(ctx, p)
	}
	start := time.Now()
	out := d.send(ctx, row, secrets, now.Unix())
	if ctx.Err() != nil {
		// Shutting down: the attempt did not finish, so it is not one.
		// The row stays due and is sent again, with the same id, by the
		// next run.
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
	if err := d.st.WebhookRecordAttempt(ctx, p); err != nil {
		return fmt.Errorf("deliver %s: %w", p.DeliveryID, err)
	}
	d.log.Info("webhook attempt", "id", p.DeliveryID, "attempt", p.Attempt.Attempt,
		"status_code", p.Attempt.StatusCode, "error", p.Attempt.Error, "status", p.Status)
	return nil
}

// secrets returns the signing secrets of the delivery's target, and false
// when the target no longer accepts deliveries.
func (d *Dispatcher) secrets(ctx context.Context, row *store.WebhookDeliveryRow) ([]string, bool, error) {
	if row.EndpointID == "" {
		ws, err := d.st.WebhookSessionInit(ctx, row.SessionID, NewSecret())
		if err != nil {
			return nil, false, err
		}
		return []string{ws.Secret}, ws.DisabledAt == nil, nil
	}
	ep, err := d.st.WebhookEndpointGet(ctx, row.EndpointID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return ep.Secrets, ep.DisabledAt == nil, nil
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
