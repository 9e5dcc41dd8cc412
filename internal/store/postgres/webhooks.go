package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// Outgoing webhooks: endpoints, per-session state, the outbox and its
// attempts (004_webhooks.sql), and the claims on deliveries
// (005_webhook_claims.sql). None of these writes notify subscribers: the
// dispatcher is their only reader and wakes itself.

// WebhookEndpointCreate inserts an endpoint; store.ErrConflict if the id exists.
func (s *Store) WebhookEndpointCreate(ctx context.Context, row *store.WebhookEndpointRow) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.WebhookEndpointCreate(row); err != nil {
		return err
	}
	_, err := s.exec(ctx, `INSERT INTO webhook_endpoints (id, project, url, events, secrets, created_at, disabled_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)`, row.ID, row.Project, row.URL, storeutil.NonNil(row.Events), row.Secrets, row.CreatedAt, row.DisabledAt)
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", row.ID, err)
	}
	return nil
}

const endpointColumns = `id, project, url, events, secrets, created_at, disabled_at`

func scanEndpoint(sc rowScanner) (*store.WebhookEndpointRow, error) {
	var r store.WebhookEndpointRow
	if err := sc.Scan(&r.ID, &r.Project, &r.URL, &r.Events, &r.Secrets, &r.CreatedAt, &r.DisabledAt); err != nil {
		return nil, err
	}
	r.Events = storeutil.NonNil(r.Events)
	r.Secrets = storeutil.NonNil(r.Secrets)
	r.CreatedAt = r.CreatedAt.UTC()
	r.DisabledAt = utcPtr(r.DisabledAt)
	return &r, nil
}

// WebhookEndpointGet returns one endpoint, or store.ErrNotFound.
func (s *Store) WebhookEndpointGet(ctx context.Context, id string) (*store.WebhookEndpointRow, error) {
	if err := checks.ID("id", id); err != nil {
		return nil, fmt.Errorf("get webhook endpoint: %w", err)
	}
	var r *store.WebhookEndpointRow
	err := s.queryRow(ctx, func(row pgx.Row) (err error) {
		r, err = scanEndpoint(row)
		return err
	}, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get webhook endpoint %s: %w", id, err)
	}
	return r, nil
}

// WebhookEndpointList returns every endpoint of project ("": of every
// project), oldest first.
func (s *Store) WebhookEndpointList(ctx context.Context, project string) ([]*store.WebhookEndpointRow, error) {
	var out []*store.WebhookEndpointRow
	err := s.query(ctx, func(rows pgx.Rows) error {
		r, err := scanEndpoint(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE $1 = '' OR project = $1 ORDER BY created_at, id`, project)
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
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		t.queue(`DELETE FROM webhook_endpoints WHERE id = $1`, id).Exec(func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() == 0 {
				return store.ErrNotFound
			}
			return nil
		})
		t.queue(`UPDATE webhook_deliveries SET status = 'disabled', next_attempt_at = NULL, updated_at = $1
WHERE endpoint_id = $2 AND status = 'pending'`, now, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	return nil
}

// WebhookSessionInit returns the session's webhook state, creating it with
// secret when missing; two callers racing get the same secret.
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
	// ON CONFLICT DO NOTHING waits for a concurrent insert of the same
	// session to commit; the SELECT after it (a new snapshot, at READ
	// COMMITTED) then reads the winner's row.
	if _, err := s.exec(ctx, `INSERT INTO webhook_sessions (session_id, secret) VALUES ($1, $2)
ON CONFLICT (session_id) DO NOTHING`, sessionID, secret); err != nil {
		return nil, fmt.Errorf("init webhook session %s: %w", sessionID, err)
	}
	var out store.WebhookSessionRow
	err := s.queryRow(ctx, func(row pgx.Row) error {
		return row.Scan(&out.SessionID, &out.Secret, &out.Cursor, &out.DisabledAt)
	}, `SELECT session_id, secret, cursor, disabled_at FROM webhook_sessions WHERE session_id = $1`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("init webhook session %s: %w", sessionID, err)
	}
	out.DisabledAt = utcPtr(out.DisabledAt)
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
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		var moved bool
		t.queue(`UPDATE webhook_sessions SET cursor = $1 WHERE session_id = $2 AND cursor = $3`, cursor, sessionID, fromCursor).
			Exec(func(ct pgconn.CommandTag) error {
				moved = ct.RowsAffected() == 1
				return nil
			})
		if err := t.flush(ctx); err != nil {
			return err
		}
		if !moved {
			var exists bool
			t.queue(`SELECT EXISTS (SELECT 1 FROM webhook_sessions WHERE session_id = $1)`, sessionID).
				QueryRow(func(row pgx.Row) error { return row.Scan(&exists) })
			if err := t.flush(ctx); err != nil {
				return err
			}
			if !exists {
				return fmt.Errorf("webhook session: %w", store.ErrNotFound)
			}
			return fmt.Errorf("cursor moved past %d: %w", fromCursor, store.ErrConflict)
		}
		for _, r := range rows {
			t.queue(`INSERT INTO webhook_deliveries (id, endpoint_id, project, session_id, url, type, event_seq, body, status,
    attempts, next_attempt_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (id) DO NOTHING`,
				r.ID, r.EndpointID, r.Project, r.SessionID, r.URL, r.Type, r.EventSeq, r.Body, r.Status, r.Attempts,
				r.NextAttemptAt, r.CreatedAt, r.UpdatedAt)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("enqueue webhooks %s: %w", sessionID, err)
	}
	return nil
}

const deliveryColumns = `pos, id, endpoint_id, project, session_id, url, type, event_seq, body, status, attempts, next_attempt_at,
    coalesce(claimed_by, ''), created_at, updated_at`

func scanDelivery(sc rowScanner) (*store.WebhookDeliveryRow, error) {
	var r store.WebhookDeliveryRow
	if err := sc.Scan(&r.Pos, &r.ID, &r.EndpointID, &r.Project, &r.SessionID, &r.URL, &r.Type, &r.EventSeq, &r.Body, &r.Status,
		&r.Attempts, &r.NextAttemptAt, &r.ClaimedBy, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return nil, err
	}
	r.NextAttemptAt = utcPtr(r.NextAttemptAt)
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	return &r, nil
}

// WebhookDue returns pending deliveries due at now, earliest first.
func (s *Store) WebhookDue(ctx context.Context, now time.Time, limit int) ([]*store.WebhookDeliveryRow, error) {
	limit, err := checks.WebhookPage(limit)
	if err != nil {
		return nil, fmt.Errorf("list due webhooks: %w", err)
	}
	var out []*store.WebhookDeliveryRow
	err = s.query(ctx, func(rows pgx.Rows) error {
		r, err := scanDelivery(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $1
ORDER BY next_attempt_at, pos LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("list due webhooks: %w", err)
	}
	return out, nil
}

// claimDueSQL claims, in one statement, up to $2 deliveries due at $1 for
// $3 until $4, and returns them with the time each was due (the order of
// the claim; RETURNING has none). FOR UPDATE SKIP LOCKED makes concurrent
// claims take disjoint rows without waiting for each other; a row that
// another claim committed meanwhile is re-checked once locked and left out,
// as it is no longer due. The CTE's WHERE and ORDER BY match the partial
// index webhook_deliveries_due.
//
// A delivery whose claim ran out (claimed_by still set) had an attempt in
// flight: lost records it (store.LostAttemptError, $5) and the update
// counts it.
const claimDueSQL = `WITH due AS (
    SELECT pos, id, next_attempt_at AS due_at, claimed_by AS lost_owner, attempts AS lost_attempts FROM webhook_deliveries
    WHERE status = 'pending' AND next_attempt_at <= $1
    ORDER BY next_attempt_at, pos
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), lost AS (
    INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_us, owner)
    SELECT id, lost_attempts + 1, $1, 0, $5, 0, lost_owner FROM due WHERE lost_owner IS NOT NULL
)
UPDATE webhook_deliveries d SET claimed_by = $3, next_attempt_at = $4, updated_at = $1,
    attempts = d.attempts + CASE WHEN due.lost_owner IS NULL THEN 0 ELSE 1 END
FROM due WHERE d.pos = due.pos
RETURNING due.due_at, d.pos, d.id, d.endpoint_id, d.project, d.session_id, d.url, d.type, d.event_seq, d.body, d.status, d.attempts,
    d.next_attempt_at, coalesce(d.claimed_by, ''), d.created_at, d.updated_at`

// WebhookClaimDue claims up to p.Limit due deliveries for p.Owner until
// p.Until and returns them, earliest due first, as claimed (NextAttemptAt
// is the claim's end). Nodes claiming at once get disjoint deliveries.
func (s *Store) WebhookClaimDue(ctx context.Context, p *store.WebhookClaimParams) ([]*store.WebhookDeliveryRow, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.WebhookClaim(p); err != nil {
		return nil, fmt.Errorf("claim due webhooks: %w", err)
	}
	type claimed struct {
		row *store.WebhookDeliveryRow
		due time.Time
	}
	var out []claimed
	err := s.query(ctx, func(rows pgx.Rows) error {
		var (
			c   claimed
			err error
		)
		if c.row, err = scanDelivery(prefixScanner{rows, &c.due}); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	}, claimDueSQL, p.Now, p.Limit, p.Owner, p.Until, store.LostAttemptError)
	if err != nil {
		return nil, fmt.Errorf("claim due webhooks for %s: %w", p.Owner, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.SortFunc(out, func(a, b claimed) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return cmp.Compare(a.row.Pos, b.row.Pos)
	})
	rows := make([]*store.WebhookDeliveryRow, len(out))
	for i, c := range out {
		rows[i] = c.row
	}
	return rows, nil
}

// prefixScanner scans a row whose first column is not the delivery's into
// first, and the rest as a delivery.
type prefixScanner struct {
	sc    rowScanner
	first any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.sc.Scan(append([]any{p.first}, dest...)...)
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
	// With inFlightLost, each claim's attempt is recorded as lost (see
	// claimDueSQL) in the same statement.
	n, err := s.exec(ctx, `WITH released AS (
    SELECT pos, id, attempts FROM webhook_deliveries WHERE claimed_by = $2 AND status = 'pending' FOR UPDATE
), lost AS (
    INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_us, owner)
    SELECT id, attempts + 1, $1, 0, $4, 0, $2 FROM released WHERE $3
)
UPDATE webhook_deliveries d SET claimed_by = NULL, next_attempt_at = least(d.next_attempt_at, $1), updated_at = $1,
    attempts = d.attempts + CASE WHEN $3 THEN 1 ELSE 0 END
FROM released WHERE d.pos = released.pos`, now, owner, inFlightLost, store.LostAttemptError)
	if err != nil {
		return 0, fmt.Errorf("release webhook claims of %s: %w", owner, err)
	}
	return int(n), nil
}

// WebhookNextDue returns the earliest pending next attempt time, or nil.
func (s *Store) WebhookNextDue(ctx context.Context) (*time.Time, error) {
	var next *time.Time
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&next) },
		`SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending'`)
	if err != nil {
		return nil, fmt.Errorf("next due webhook: %w", err)
	}
	return utcPtr(next), nil
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
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		var (
			endpointID, sessionID, claimedBy string
			attempts                         int
		)
		// FOR UPDATE: attempts of one delivery are recorded one at a time,
		// and the claim checked below cannot change before the commit.
		t.queue(`SELECT endpoint_id, session_id, coalesce(claimed_by, ''), attempts FROM webhook_deliveries WHERE id = $1 FOR UPDATE`,
			p.DeliveryID).
			QueryRow(func(row pgx.Row) error {
				if err := row.Scan(&endpointID, &sessionID, &claimedBy, &attempts); err != nil {
					return fmt.Errorf("delivery: %w", mapErr(err))
				}
				return nil
			})
		if err := t.flush(ctx); err != nil {
			return err
		}
		a := p.Attempt
		if err := storeutil.ClaimHeld(claimedBy, attempts, a); err != nil {
			return err
		}
		t.queue(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_us, owner)
VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			p.DeliveryID, a.Attempt, a.At, a.StatusCode, a.Error, a.Duration.Microseconds(), a.Owner)
		// A delivery settled while the attempt was in flight (disabled)
		// keeps its status; the claim ends either way.
		t.queue(`UPDATE webhook_deliveries SET
    status = CASE WHEN status = 'pending' THEN $1 ELSE status END,
    next_attempt_at = CASE WHEN status = 'pending' THEN $2 ELSE next_attempt_at END,
    attempts = $3, claimed_by = NULL, updated_at = $4 WHERE id = $5`,
			p.Status, next, a.Attempt, p.Now, p.DeliveryID)
		if !p.DisableTarget {
			return nil
		}
		if endpointID != "" {
			t.queue(`UPDATE webhook_endpoints SET disabled_at = $1 WHERE id = $2 AND disabled_at IS NULL`, p.Now, endpointID)
			t.queue(`UPDATE webhook_deliveries SET status = 'disabled', next_attempt_at = NULL, updated_at = $1
WHERE endpoint_id = $2 AND status = 'pending'`, p.Now, endpointID)
		} else {
			target := cmp.Or(p.TargetSessionID, sessionID)
			t.queue(`UPDATE webhook_sessions SET disabled_at = $1 WHERE session_id = $2 AND disabled_at IS NULL`, p.Now, target)
			t.queue(`UPDATE webhook_deliveries SET status = 'disabled', next_attempt_at = NULL, updated_at = $1
WHERE endpoint_id = '' AND session_id IN ($2, $3) AND status = 'pending'`, p.Now, target, sessionID)
		}
		return nil
	})
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
	q, args := `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE pos < $1 ORDER BY pos DESC LIMIT $2`, []any{before, limit}
	if p.Project != "" {
		q = `SELECT ` + deliveryColumns + ` FROM webhook_deliveries WHERE project = $3 AND pos < $1 ORDER BY pos DESC LIMIT $2`
		args = append(args, p.Project)
	}
	var out []*store.WebhookDeliveryRow
	err = s.query(ctx, func(rows pgx.Rows) error {
		r, err := scanDelivery(rows)
		if err != nil {
			return err
		}
		r.AttemptList = []store.WebhookAttemptRow{}
		out = append(out, r)
		return nil
	}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	// All the page's attempts in one query.
	byID := make(map[string]*store.WebhookDeliveryRow, len(out))
	ids := make([]string, len(out))
	for i, d := range out {
		byID[d.ID] = d
		ids[i] = d.ID
	}
	err = s.query(ctx, func(rows pgx.Rows) error {
		var (
			id  string
			a   store.WebhookAttemptRow
			dur int64
		)
		if err := rows.Scan(&id, &a.Attempt, &a.Owner, &a.At, &a.StatusCode, &a.Error, &dur); err != nil {
			return err
		}
		a.At = a.At.UTC()
		a.Duration = time.Duration(dur) * time.Microsecond
		if d := byID[id]; d != nil {
			d.AttemptList = append(d.AttemptList, a)
		}
		return nil
	}, `SELECT delivery_id, attempt, owner, at, status_code, error, duration_us FROM webhook_attempts
WHERE delivery_id = ANY($1) ORDER BY delivery_id, attempt`, ids)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: attempts: %w", err)
	}
	return out, nil
}
