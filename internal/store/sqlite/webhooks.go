package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// Outgoing webhooks: endpoints, per-session state, the outbox and its
// attempts (004_webhooks.sql), and the claims on deliveries
// (005_webhook_claims.sql). None of these writes notify subscribers: the
// dispatcher is their only reader and wakes itself.
//
// Claims need no locking beyond the single writer: a claim selects the due
// deliveries and claims them in one write transaction, which no other
// write interleaves with, so concurrent claims see each other's claims.

// WebhookEndpointCreate inserts an endpoint; store.ErrConflict if the id exists.
func (s *Store) WebhookEndpointCreate(ctx context.Context, row *store.WebhookEndpointRow) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.WebhookEndpointCreate(row); err != nil {
		return err
	}
	events, err := json.Marshal(storeutil.NonNil(row.Events))
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: encode events: %w", row.ID, err)
	}
	secrets, err := json.Marshal(row.Secrets)
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: encode secrets: %w", row.ID, err)
	}
	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		_, err := w.exec(`INSERT INTO webhook_endpoints (id, project, url, events, secrets, created_at, disabled_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			row.ID, row.Project, row.URL, string(events), string(secrets), toMicros(row.CreatedAt), nullMicros(row.DisabledAt))
		return nil, mapErr(err)
	}})
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", row.ID, err)
	}
	return nil
}

const endpointColumns = `id, project, url, events, secrets, created_at, disabled_at`

func scanEndpoint(sc interface{ Scan(...any) error }) (*store.WebhookEndpointRow, error) {
	var (
		r               store.WebhookEndpointRow
		events, secrets string
		created         int64
		disabled        sql.NullInt64
	)
	if err := sc.Scan(&r.ID, &r.Project, &r.URL, &events, &secrets, &created, &disabled); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(events), &r.Events); err != nil {
		return nil, fmt.Errorf("webhook endpoint %s: stored events: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(secrets), &r.Secrets); err != nil {
		return nil, fmt.Errorf("webhook endpoint %s: stored secrets: %w", r.ID, err)
	}
	r.Events = storeutil.NonNil(r.Events)
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

// WebhookEndpointList returns every endpoint of project ("": of every
// project), oldest first.
func (s *Store) WebhookEndpointList(ctx context.Context, project string) ([]*store.WebhookEndpointRow, error) {
	var out []*store.WebhookEndpointRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		r, err := scanEndpoint(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE ? = '' OR project = ? ORDER BY created_at, id`, project, project)
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
	if err := checks.ID("id", id); err != nil {
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
	if err := checks.ID("session_id", sessionID); err != nil {
		return nil, fmt.Errorf("init webhook session: %w", err)
	}
	if err := checks.ID("secret", secret); err != nil {
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
	if err := checks.ID("session_id", sessionID); err != nil {
		return fmt.Errorf("enqueue webhooks: %w", err)
	}
	if cursor < fromCursor {
		return fmt.Errorf("enqueue webhooks %s: cursor %d is before from_cursor %d", sessionID, cursor, fromCursor)
	}
	for i, r := range rows {
		if err := checks.WebhookDelivery(r); err != nil {
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
			_, err := w.exec(`INSERT INTO webhook_deliveries (id, endpoint_id, project, session_id, url, type, event_seq, body, status, attempts, next_attempt_at, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
				r.ID, r.EndpointID, r.Project, r.SessionID, r.URL, r.Type, r.EventSeq, r.Body, r.Status, r.Attempts,
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

const deliveryColumns = `pos, id, endpoint_id, project, session_id, url, type, event_seq, body, status, attempts, next_attempt_at,
    coalesce(claimed_by, ''), created_at, updated_at`

func scanDelivery(sc interface{ Scan(...any) error }) (*store.WebhookDeliveryRow, error) {
	var (
		r                store.WebhookDeliveryRow
		next             sql.NullInt64
		created, updated int64
	)
	if err := sc.Scan(&r.Pos, &r.ID, &r.EndpointID, &r.Project, &r.SessionID, &r.URL, &r.Type, &r.EventSeq, &r.Body, &r.Status,
		&r.Attempts, &next, &r.ClaimedBy, &created, &updated); err != nil {
		return nil, err
	}
	r.NextAttemptAt = fromNullMicros(next)
	r.CreatedAt = fromMicros(created)
	r.UpdatedAt = fromMicros(updated)
	return &r, nil
}

// WebhookDue returns pending deliveries due at now, earliest first.
func (s *Store) WebhookDue(ctx context.Context, now time.Time, limit int) ([]*store.WebhookDeliveryRow, error) {
	limit, err := checks.WebhookPage(limit)
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
	}, dueSQL, toMicros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list due webhooks: %w", err)
	}
	return out, nil
}

// dueSQL selects the due deliveries, earliest first (the due index).
const dueSQL = `SELECT ` + deliveryColumns + ` FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?
ORDER BY next_attempt_at, pos LIMIT ?`

// WebhookClaimDue claims up to p.Limit due deliveries for p.Owner until
// p.Until and returns them, earliest due first, as claimed (NextAttemptAt
// is the claim's end).
func (s *Store) WebhookClaimDue(ctx context.Context, p *store.WebhookClaimParams) ([]*store.WebhookDeliveryRow, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.WebhookClaim(p); err != nil {
		return nil, fmt.Errorf("claim due webhooks: %w", err)
	}
	now, until := toMicros(p.Now), toMicros(p.Until)
	// Look first on a read connection: a dispatcher claims whenever it is
	// woken, and finding nothing must not cost a write transaction (and an
	// fsync). A delivery that becomes due after the look is the next
	// claim's, as for a claim made just before it became due.
	var found bool
	err := s.query(ctx, func(*sql.Rows) error { found = true; return nil },
		`SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 1`, now)
	if err != nil {
		return nil, fmt.Errorf("claim due webhooks for %s: %w", p.Owner, err)
	}
	if !found {
		return nil, nil
	}
	var out []*store.WebhookDeliveryRow
	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		out = nil
		due, err := w.dueDeliveries(now, p.Limit)
		if err != nil {
			return nil, err
		}
		for _, r := range due {
			if r.ClaimedBy != "" {
				// Its claim ran out with an attempt in flight.
				if err := w.recordLostAttempt(r.ID, r.Attempts, now, r.ClaimedBy); err != nil {
					return nil, err
				}
				r.Attempts++
			}
			if _, err := w.exec(`UPDATE webhook_deliveries SET claimed_by = ?, next_attempt_at = ?, attempts = ?, updated_at = ? WHERE pos = ?`,
				p.Owner, until, r.Attempts, now, r.Pos); err != nil {
				return nil, fmt.Errorf("claim %s: %w", r.ID, mapErr(err))
			}
			r.ClaimedBy = p.Owner
			r.NextAttemptAt = ptrTime(fromMicros(until))
			r.UpdatedAt = fromMicros(now)
		}
		out = due
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("claim due webhooks for %s: %w", p.Owner, err)
	}
	return out, nil
}

func ptrTime(t time.Time) *time.Time { return &t }

// recordLostAttempt records attempt attempts+1 of delivery id, which owner
// made under a claim that ended without its outcome (see
// store.LostAttemptError).
func (w *writer) recordLostAttempt(id string, attempts int, now int64, owner string) error {
	if _, err := w.exec(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_us, owner) VALUES (?, ?, ?, 0, ?, 0, ?)`,
		id, attempts+1, now, store.LostAttemptError, owner); err != nil {
		return fmt.Errorf("record the lost attempt of %s: %w", id, mapErr(err))
	}
	return nil
}

// claimedDelivery is a delivery's id and attempts count.
type claimedDelivery struct {
	id       string
	attempts int
}

// claimedBy reads the pending deliveries owner has claimed, inside the
// write transaction.
func (w *writer) claimedBy(owner string) ([]claimedDelivery, error) {
	st, err := w.stmts.get(context.Background(), `SELECT id, attempts FROM webhook_deliveries WHERE claimed_by = ? AND status = 'pending'`)
	if err != nil {
		return nil, fmt.Errorf("select claimed webhooks: %w", mapErr(err))
	}
	rows, err := st.QueryContext(context.Background(), owner)
	if err != nil {
		return nil, fmt.Errorf("select claimed webhooks: %w", mapErr(err))
	}
	defer func() { _ = rows.Close() }()
	var out []claimedDelivery
	for rows.Next() {
		var c claimedDelivery
		if err := rows.Scan(&c.id, &c.attempts); err != nil {
			return nil, fmt.Errorf("select claimed webhooks: %w", mapErr(err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select claimed webhooks: %w", mapErr(err))
	}
	return out, nil
}

// dueDeliveries reads the due deliveries inside the write transaction.
func (w *writer) dueDeliveries(now int64, limit int) ([]*store.WebhookDeliveryRow, error) {
	st, err := w.stmts.get(context.Background(), dueSQL)
	if err != nil {
		return nil, fmt.Errorf("select due webhooks: %w", mapErr(err))
	}
	rows, err := st.QueryContext(context.Background(), now, limit)
	if err != nil {
		return nil, fmt.Errorf("select due webhooks: %w", mapErr(err))
	}
	defer func() { _ = rows.Close() }()
	var out []*store.WebhookDeliveryRow
	for rows.Next() {
		r, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("select due webhooks: %w", mapErr(err))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select due webhooks: %w", mapErr(err))
	}
	return out, nil
}

// WebhookReleaseClaims ends owner's claims on pending deliveries, making
// them due at now at the latest.
func (s *Store) WebhookReleaseClaims(ctx context.Context, owner string, now time.Time, inFlightLost bool) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	if err := checks.ID("owner", owner); err != nil {
		return 0, fmt.Errorf("release webhook claims: %w", err)
	}
	if err := checks.Time("now", now); err != nil {
		return 0, fmt.Errorf("release webhook claims of %s: %w", owner, err)
	}
	var n int64
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var err error
		if inFlightLost {
			lost, err := w.claimedBy(owner)
			if err != nil {
				return nil, err
			}
			for _, c := range lost {
				if err := w.recordLostAttempt(c.id, c.attempts, toMicros(now), owner); err != nil {
					return nil, err
				}
			}
		}
		n, err = w.changed(`UPDATE webhook_deliveries SET claimed_by = NULL, next_attempt_at = min(next_attempt_at, ?),
    attempts = attempts + ?, updated_at = ?
WHERE claimed_by = ? AND status = 'pending'`, toMicros(now), boolInt(inFlightLost), toMicros(now), owner)
		return nil, mapErr(err)
	}})
	if err != nil {
		return 0, fmt.Errorf("release webhook claims of %s: %w", owner, err)
	}
	return int(n), nil
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
	if err := checks.WebhookAttempt(p); err != nil {
		return err
	}
	next := p.NextAttemptAt
	if p.Status != store.WebhookPending {
		next = nil
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var (
			endpointID, sessionID, claimedBy string
			attempts                         int
		)
		if err := w.queryRow(`SELECT endpoint_id, session_id, coalesce(claimed_by, ''), attempts FROM webhook_deliveries WHERE id = ?`,
			p.DeliveryID).Scan(&endpointID, &sessionID, &claimedBy, &attempts); err != nil {
			return nil, fmt.Errorf("delivery: %w", mapErr(err))
		}
		a := p.Attempt
		if err := storeutil.ClaimHeld(claimedBy, attempts, a); err != nil {
			return nil, err
		}
		if _, err := w.exec(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_us, owner) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.DeliveryID, a.Attempt, toMicros(a.At), a.StatusCode, a.Error, a.Duration.Microseconds(), a.Owner); err != nil {
			return nil, mapErr(err)
		}
		// A delivery settled while the attempt was in flight (disabled)
		// keeps its status; the claim ends either way.
		if _, err := w.exec(`UPDATE webhook_deliveries SET
    status = CASE WHEN status = 'pending' THEN ? ELSE status END,
    next_attempt_at = CASE WHEN status = 'pending' THEN ? ELSE next_attempt_at END,
    attempts = ?, claimed_by = NULL, updated_at = ? WHERE id = ?`,
			p.Status, nullMicros(next), a.Attempt, toMicros(p.Now), p.DeliveryID); err != nil {
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
			target := cmp.Or(p.TargetSessionID, sessionID)
			if _, err = w.exec(`UPDATE webhook_sessions SET disabled_at = ? WHERE session_id = ? AND disabled_at IS NULL`, now, target); err == nil {
				_, err = w.exec(`UPDATE webhook_deliveries SET status = 'disabled', next_attempt_at = NULL, updated_at = ?
WHERE endpoint_id = '' AND session_id IN (?, ?) AND status = 'pending'`, now, target, sessionID)
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
	limit, err := checks.WebhookPage(p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	before := p.BeforePos
	if before <= 0 {
		before = 1<<63 - 1
	}
	q, args := `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE pos < ? ORDER BY pos DESC LIMIT ?`, []any{before, limit}
	if p.Project != "" {
		q, args = `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE project = ? AND pos < ? ORDER BY pos DESC LIMIT ?`, []any{p.Project, before, limit}
	}
	var out []*store.WebhookDeliveryRow
	err = s.query(ctx, func(rows *sql.Rows) error {
		r, err := scanDelivery(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, q, args...)
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
			if err := rows.Scan(&a.Attempt, &a.Owner, &at, &a.StatusCode, &a.Error, &dur); err != nil {
				return err
			}
			a.At = fromMicros(at)
			a.Duration = time.Duration(dur) * time.Microsecond
			d.AttemptList = append(d.AttemptList, a)
			return nil
		}, `SELECT attempt, owner, at, status_code, error, duration_us FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt`, d.ID)
		if err != nil {
			return nil, fmt.Errorf("list webhook deliveries: attempts of %s: %w", d.ID, err)
		}
	}
	return out, nil
}
