package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// Outgoing webhooks: endpoints, per-session state, the outbox and its
// attempts (004_webhooks.sql). None of these writes notify subscribers: the
// dispatcher is their only reader and wakes itself.

// maxWebhookPage bounds a page of WebhookDue and WebhookDeliveryList.
const maxWebhookPage = 1000

// WebhookEndpointCreate inserts an endpoint; store.ErrConflict if the id exists.
func (s *Store) WebhookEndpointCreate(ctx context.Context, row *store.WebhookEndpointRow) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if row == nil {
		return errors.New("create webhook endpoint: row is nil")
	}
	if err := checkID("id", row.ID); err != nil {
		return fmt.Errorf("create webhook endpoint: %w", err)
	}
	if err := checkID("url", row.URL); err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", row.ID, err)
	}
	if len(row.Secrets) == 0 {
		return fmt.Errorf("create webhook endpoint %s: secrets is empty", row.ID)
	}
	if err := checkTime("created_at", row.CreatedAt); err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", row.ID, err)
	}
	events, err := json.Marshal(nonNil(row.Events))
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: encode events: %w", row.ID, err)
	}
	secrets, err := json.Marshal(row.Secrets)
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: encode secrets: %w", row.ID, err)
	}
	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		_, err := w.exec(`INSERT INTO webhook_endpoints (id, url, events, secrets, created_at, disabled_at) VALUES (?, ?, ?, ?, ?, ?)`,
			row.ID, row.URL, string(events), string(secrets), toMicros(row.CreatedAt), nullMicros(row.DisabledAt))
		return nil, mapErr(err)
	}})
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", row.ID, err)
	}
	return nil
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

const endpointColumns = `id, url, events, secrets, created_at, disabled_at`

func scanEndpoint(sc interface{ Scan(...any) error }) (*store.WebhookEndpointRow, error) {
	var (
		r               store.WebhookEndpointRow
		events, secrets string
		created         int64
		disabled        sql.NullInt64
	)
	if err := sc.Scan(&r.ID, &r.URL, &events, &secrets, &created, &disabled); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(events), &r.Events); err != nil {
		return nil, fmt.Errorf("webhook endpoint %s: stored events: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(secrets), &r.Secrets); err != nil {
		return nil, fmt.Errorf("webhook endpoint %s: stored secrets: %w", r.ID, err)
	}
	r.Events = nonNil(r.Events)
	r.CreatedAt = fromMicros(created)
	r.DisabledAt = fromNullMicros(disabled)
	return &r, nil
}

// WebhookEndpointGet returns one endpoint, or store.ErrNotFound.
func (s *Store) WebhookEndpointGet(ctx context.Context, id string) (*store.WebhookEndpointRow, error) {
	row, err := s.queryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get webhook endpoint %s: %w", id, err)
	}
	r, err := scanEndpoint(row)
	if err != nil {
		return nil, fmt.Errorf("get webhook endpoint %s: %w", id, s.readErr(err))
	}
	return r, nil
}

// WebhookEndpointList returns every endpoint, oldest first.
func (s *Store) WebhookEndpointList(ctx context.Context) ([]*store.WebhookEndpointRow, error) {
	var out []*store.WebhookEndpointRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		r, err := scanEndpoint(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+endpointColumns+` FROM webhook_endpoints ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return out, nil
}

// WebhookEndpointDelete removes an endpoint and disables its pending
// deliveries (their rows and attempts stay listed).
func (s *Store) WebhookEndpointDelete(ctx context.Context, id string, now time.Time) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checkID("id", id); err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", err)
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		n, err := w.changed(`DELETE FROM webhook_endpoints WHERE id = ?`, id)
		if err != nil {
			return nil, mapErr(err)
		}
		if n == 0 {
			return nil, store.ErrNotFound
		}
		_, err = w.exec(`UPDATE webhook_deliveries SET status = 'disabled', next_attempt_at = NULL, updated_at = ?
WHERE endpoint_id = ? AND status = 'pending'`, toMicros(now), id)
		return nil, mapErr(err)
	}})
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	return nil
}

// WebhookSessionInit returns the session's webhook state, creating it with
// secret when missing.
func (s *Store) WebhookSessionInit(ctx context.Context, sessionID, secret string) (*store.WebhookSessionRow, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checkID("session_id", sessionID); err != nil {
		return nil, fmt.Errorf("init webhook session: %w", err)
	}
	if err := checkID("secret", secret); err != nil {
		return nil, fmt.Errorf("init webhook session %s: %w", sessionID, err)
	}
	var out store.WebhookSessionRow
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		if _, err := w.exec(`INSERT INTO webhook_sessions (session_id, secret) VALUES (?, ?) ON CONFLICT (session_id) DO NOTHING`,
			sessionID, secret); err != nil {
			return nil, mapErr(err)
		}
		var disabled sql.NullInt64
		err := w.queryRow(`SELECT session_id, secret, cursor, disabled_at FROM webhook_sessions WHERE session_id = ?`, sessionID).
			Scan(&out.SessionID, &out.Secret, &out.Cursor, &disabled)
		out.DisabledAt = fromNullMicros(disabled)
		return nil, mapErr(err)
	}})
	if err != nil {
		return nil, fmt.Errorf("init webhook session %s: %w", sessionID, err)
	}
	return &out, nil
}

// WebhookEnqueue inserts deliveries and moves the session's cursor, if the
// cursor is still fromCursor.
func (s *Store) WebhookEnqueue(ctx context.Context, sessionID string, fromCursor, cursor int64, rows []*store.WebhookDeliveryRow) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checkID("session_id", sessionID); err != nil {
		return fmt.Errorf("enqueue webhooks: %w", err)
	}
	if cursor < fromCursor {
		return fmt.Errorf("enqueue webhooks %s: cursor %d is before from_cursor %d", sessionID, cursor, fromCursor)
	}
	for i, r := range rows {
		if err := checkDelivery(r); err != nil {
			return fmt.Errorf("enqueue webhooks %s: rows[%d]: %w", sessionID, i, err)
		}
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		n, err := w.changed(`UPDATE webhook_sessions SET cursor = ? WHERE session_id = ? AND cursor = ?`, cursor, sessionID, fromCursor)
		if err != nil {
			return nil, mapErr(err)
		}
		if n == 0 {
			var one int
			if err := w.queryRow(`SELECT 1 FROM webhook_sessions WHERE session_id = ?`, sessionID).Scan(&one); err != nil {
				return nil, fmt.Errorf("webhook session: %w", mapErr(err))
			}
			return nil, fmt.Errorf("cursor moved past %d: %w", fromCursor, store.ErrConflict)
		}
		for _, r := range rows {
			_, err := w.exec(`INSERT INTO webhook_deliveries (id, endpoint_id, session_id, url, type, event_seq, body, status, attempts, next_attempt_at, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
				r.ID, r.EndpointID, r.SessionID, r.URL, r.Type, r.EventSeq, r.Body, r.Status, r.Attempts,
				nullMicros(r.NextAttemptAt), toMicros(r.CreatedAt), toMicros(r.UpdatedAt))
			if err != nil {
				return nil, mapErr(err)
			}
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("enqueue webhooks %s: %w", sessionID, err)
	}
	return nil
}

func checkDelivery(r *store.WebhookDeliveryRow) error {
	if r == nil {
		return errors.New("row is nil")
	}
	for _, f := range []struct{ name, v string }{{"id", r.ID}, {"session_id", r.SessionID}, {"url", r.URL}, {"type", r.Type}, {"status", r.Status}} {
		if err := checkID(f.name, f.v); err != nil {
			return err
		}
	}
	if len(r.Body) == 0 {
		return errors.New("body is empty")
	}
	if err := checkTime("created_at", r.CreatedAt); err != nil {
		return err
	}
	return checkTime("updated_at", r.UpdatedAt)
}

const deliveryColumns = `pos, id, endpoint_id, session_id, url, type, event_seq, body, status, attempts, next_attempt_at, created_at, updated_at`

func scanDelivery(sc interface{ Scan(...any) error }) (*store.WebhookDeliveryRow, error) {
	var (
		r                store.WebhookDeliveryRow
		next             sql.NullInt64
		created, updated int64
	)
	if err := sc.Scan(&r.Pos, &r.ID, &r.EndpointID, &r.SessionID, &r.URL, &r.Type, &r.EventSeq, &r.Body, &r.Status,
		&r.Attempts, &next, &created, &updated); err != nil {
		return nil, err
	}
	r.NextAttemptAt = fromNullMicros(next)
	r.CreatedAt = fromMicros(created)
	r.UpdatedAt = fromMicros(updated)
	return &r, nil
}

func checkPage(limit int) (int, error) {
	switch {
	case limit == 0:
		return 50, nil
	case limit < 0 || limit > maxWebhookPage:
		return 0, fmt.Errorf("limit must be between 1 and %d, got %d", maxWebhookPage, limit)
	}
	return limit, nil
}

// WebhookDue returns pending deliveries due at now, earliest first.
func (s *Store) WebhookDue(ctx context.Context, now time.Time, limit int) ([]*store.WebhookDeliveryRow, error) {
	limit, err := checkPage(limit)
	if err != nil {
		return nil, fmt.Errorf("list due webhooks: %w", err)
	}
	var out []*store.WebhookDeliveryRow
	err = s.query(ctx, func(rows *sql.Rows) error {
		r, err := scanDelivery(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?
ORDER BY next_attempt_at, pos LIMIT ?`, toMicros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list due webhooks: %w", err)
	}
	return out, nil
}

// WebhookNextDue returns the earliest pending next attempt time, or nil.
func (s *Store) WebhookNextDue(ctx context.Context) (*time.Time, error) {
	row, err := s.queryRow(ctx, `SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending'`)
	if err != nil {
		return nil, fmt.Errorf("next due webhook: %w", err)
	}
	var v sql.NullInt64
	if err := row.Scan(&v); err != nil {
		return nil, fmt.Errorf("next due webhook: %w", s.readErr(err))
	}
	return fromNullMicros(v), nil
}

// WebhookRecordAttempt records an attempt and the delivery's new state.
func (s *Store) WebhookRecordAttempt(ctx context.Context, p *store.WebhookAttemptParams) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if p == nil {
		return errors.New("record webhook attempt: params is nil")
	}
	if err := checkID("delivery_id", p.DeliveryID); err != nil {
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
	if err := checkTime("attempt.at", p.Attempt.At); err != nil {
		return fmt.Errorf("record webhook attempt %s: %w", p.DeliveryID, err)
	}
	if err := checkTime("now", p.Now); err != nil {
		return fmt.Errorf("record webhook attempt %s: %w", p.DeliveryID, err)
	}
	next := p.NextAttemptAt
	if p.Status != store.WebhookPending {
		next = nil
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var endpointID, sessionID string
		if err := w.queryRow(`SELECT endpoint_id, session_id FROM webhook_deliveries WHERE id = ?`, p.DeliveryID).
			Scan(&endpointID, &sessionID); err != nil {
			return nil, fmt.Errorf("delivery: %w", mapErr(err))
		}
		a := p.Attempt
		if _, err := w.exec(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_us) VALUES (?, ?, ?, ?, ?, ?)`,
			p.DeliveryID, a.Attempt, toMicros(a.At), a.StatusCode, a.Error, a.Duration.Microseconds()); err != nil {
			return nil, mapErr(err)
		}
		if _, err := w.exec(`UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?, updated_at = ? WHERE id = ?`,
			p.Status, a.Attempt, nullMicros(next), toMicros(p.Now), p.DeliveryID); err != nil {
			return nil, mapErr(err)
		}
		if !p.DisableTarget {
			return nil, nil
		}
		now := toMicros(p.Now)
		var err error
		if endpointID != "" {
			if _, err = w.exec(`UPDATE webhook_endpoints SET disabled_at = ? WHERE id = ? AND disabled_at IS NULL`, now, endpointID); err == nil {
				_, err = w.exec(`UPDATE webhook_deliveries SET status = 'disabled', next_attempt_at = NULL, updated_at = ?
WHERE endpoint_id = ? AND status = 'pending'`, now, endpointID)
			}
		} else {
			if _, err = w.exec(`UPDATE webhook_sessions SET disabled_at = ? WHERE session_id = ? AND disabled_at IS NULL`, now, sessionID); err == nil {
				_, err = w.exec(`UPDATE webhook_deliveries SET status = 'disabled', next_attempt_at = NULL, updated_at = ?
WHERE endpoint_id = '' AND session_id = ? AND status = 'pending'`, now, sessionID)
			}
		}
		return nil, mapErr(err)
	}})
	if err != nil {
		return fmt.Errorf("record webhook attempt %s: %w", p.DeliveryID, err)
	}
	return nil
}

// WebhookDeliveryList pages deliveries newest first, each with its attempts.
func (s *Store) WebhookDeliveryList(ctx context.Context, p *store.WebhookDeliveryListParams) ([]*store.WebhookDeliveryRow, error) {
	if p == nil {
		p = &store.WebhookDeliveryListParams{}
	}
	limit, err := checkPage(p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	before := p.BeforePos
	if before <= 0 {
		before = 1<<63 - 1
	}
	var out []*store.WebhookDeliveryRow
	err = s.query(ctx, func(rows *sql.Rows) error {
		r, err := scanDelivery(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE pos < ? ORDER BY pos DESC LIMIT ?`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	for _, d := range out {
		d.AttemptList = []store.WebhookAttemptRow{}
		err := s.query(ctx, func(rows *sql.Rows) error {
			var (
				a       store.WebhookAttemptRow
				at, dur int64
			)
			if err := rows.Scan(&a.Attempt, &at, &a.StatusCode, &a.Error, &dur); err != nil {
				return err
			}
			a.At = fromMicros(at)
			a.Duration = time.Duration(dur) * time.Microsecond
			d.AttemptList = append(d.AttemptList, a)
			return nil
		}, `SELECT attempt, at, status_code, error, duration_us FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt`, d.ID)
		if err != nil {
			return nil, fmt.Errorf("list webhook deliveries: attempts of %s: %w", d.ID, err)
		}
	}
	return out, nil
}
