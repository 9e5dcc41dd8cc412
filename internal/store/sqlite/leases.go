package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// claimableSQL selects the claimable sessions without a live lease, oldest
// wake first: runnable ones (waiting since their last update, or since their
// wake time if they have one) and, disjoint from them, non-runnable ones whose
// wake time has come. Each half reads only its partial index. The owner of
// an expired lease comes along: the claim takes the session over from it.
const claimableSQL = `SELECT id, k, lease_owner FROM (
    SELECT id, coalesce(wake_at, updated_at) AS k, lease_owner FROM sessions
    WHERE runnable = 1 AND (lease_owner IS NULL OR lease_expires_at <= ?)
        AND (claim_node IS NULL OR claim_node = ? OR claim_node_until <= ?)
    UNION ALL
    SELECT id, wake_at AS k, lease_owner FROM sessions
    WHERE wake_at IS NOT NULL AND wake_at <= ? AND runnable = 0
        AND (lease_owner IS NULL OR lease_expires_at <= ?)
        AND (claim_node IS NULL OR claim_node = ? OR claim_node_until <= ?)
)
ORDER BY k, id
LIMIT ?`

// LeaseClaim claims up to p.Limit (at most 1000) claimable sessions for
// p.Owner until p.ExpiresAt, bumping each one's epoch, and returns the
// leases oldest wake first. A session is claimable when it is runnable or its
// wake time is at or before p.Now, and it has no owner or its lease expired
// at or before p.Now, and it was not handed over to another node than
// p.Owner until after p.Now (LeaseHandOver).
func (s *Store) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]store.Lease, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.LeaseClaim(p); err != nil {
		return nil, fmt.Errorf("claim sessions: %w", err)
	}
	now := toMicros(p.Now)
	expires := toMicros(p.ExpiresAt)
	// Look first on a read connection: a scheduler polls often, and an empty
	// claim must not cost a write transaction (and an fsync). A session that
	// becomes claimable just after this look announces itself with a
	// notification, which triggers the next claim.
	var found bool
	err := s.query(ctx, func(*sql.Rows) error { found = true; return nil }, claimableSQL, now, p.Owner, now, now, now, p.Owner, now, 1)
	if err != nil {
		return nil, fmt.Errorf("claim sessions for %s: %w", p.Owner, err)
	}
	if !found {
		return nil, nil
	}
	var leases []store.Lease
	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		leases = nil
		ids, owners, err := w.claimable(now, p.Owner, p.Limit)
		if err != nil {
			return nil, err
		}
		for i, id := range ids {
			var epoch int64
			err := w.queryRow(`UPDATE sessions SET lease_owner = ?, lease_expires_at = ?, lease_epoch = lease_epoch + 1,
    claim_node = NULL, claim_node_until = NULL
WHERE id = ? RETURNING lease_epoch`, p.Owner, expires, id).Scan(&epoch)
			if err != nil {
				return nil, fmt.Errorf("claim session %s: %w", id, mapErr(err))
			}
			leases = append(leases, store.Lease{
				SessionID:     id,
				Owner:         p.Owner,
				Epoch:         epoch,
				ExpiresAt:     fromMicros(expires),
				PreviousOwner: owners[i],
			})
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("claim sessions for %s: %w", p.Owner, err)
	}
	return leases, nil
}

// claimable returns the ids of the claimable sessions and, for each, the
// owner of its expired lease ("" when it had none).
func (w *writer) claimable(now int64, owner string, limit int) (ids, owners []string, err error) {
	st, err := w.stmts.get(context.Background(), claimableSQL)
	if err != nil {
		return nil, nil, fmt.Errorf("select claimable sessions: %w", mapErr(err))
	}
	rows, err := st.QueryContext(context.Background(), now, owner, now, now, now, owner, now, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("select claimable sessions: %w", mapErr(err))
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var (
			id    string
			k     int64
			owner sql.NullString
		)
		if err := rows.Scan(&id, &k, &owner); err != nil {
			return nil, nil, fmt.Errorf("select claimable sessions: %w", mapErr(err))
		}
		ids = append(ids, id)
		owners = append(owners, owner.String)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("select claimable sessions: %w", mapErr(err))
	}
	return ids, owners, nil
}

// LeaseRenew moves the lease's expiry to expiresAt if (Owner, Epoch) still
// hold the session, even if the lease expired, as long as nobody claimed the
// session since; else store.ErrLeaseLost (store.ErrNotFound for an unknown
// session).
func (s *Store) LeaseRenew(ctx context.Context, l store.Lease, expiresAt time.Time) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.Lease(l); err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	if err := checks.Time("expires_at", expiresAt); err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		n, err := w.changed(`UPDATE sessions SET lease_expires_at = ?
WHERE id = ? AND lease_owner = ? AND lease_epoch = ?`, toMicros(expiresAt), l.SessionID, l.Owner, l.Epoch)
		if err != nil {
			return nil, mapErr(err)
		}
		if n == 0 {
			return nil, w.leaseLost(l)
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("renew lease on session %s: %w", l.SessionID, err)
	}
	return nil
}

// LeaseRelease clears the lease if (Owner, Epoch) still hold it, leaving the
// session's wake condition as it is, so a runnable session can be claimed
// again at once (subscribers get a KindRunnable notification). A lease that
// is already lost is reported as store.ErrLeaseLost, so a worker learns that
// someone else took over; store.ErrNotFound for an unknown session.
func (s *Store) LeaseRelease(ctx context.Context, l store.Lease) error {
	return s.release(ctx, l, nil, nil)
}

// LeaseHandOver implements store.Store: LeaseRelease, with the session
// claimable only by node until until.
func (s *Store) LeaseHandOver(ctx context.Context, l store.Lease, node string, until time.Time) error {
	if err := checks.HandOver(node, until); err != nil {
		return fmt.Errorf("hand session %s over: %w", l.SessionID, err)
	}
	u := toMicros(until)
	return s.release(ctx, l, &node, &u)
}

// release clears l's lease and sets the session's hand-over (nil: none).
func (s *Store) release(ctx context.Context, l store.Lease, node *string, until *int64) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.Lease(l); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var (
			runnable int64
			wake     sql.NullInt64
		)
		err := w.queryRow(`UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL, claim_node = ?, claim_node_until = ?
WHERE id = ? AND lease_owner = ? AND lease_epoch = ? RETURNING runnable, wake_at`,
			node, until, l.SessionID, l.Owner, l.Epoch).Scan(&runnable, &wake)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, w.leaseLost(l)
		}
		if err != nil {
			return nil, mapErr(err)
		}
		if runnable != 0 || wake.Valid {
			return []store.Notification{{Kind: store.KindRunnable, SessionID: l.SessionID}}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("release lease on session %s: %w", l.SessionID, err)
	}
	return nil
}

// LeaseExpireOwner sets the expiry of every live lease held by owner to now,
// so its sessions can be claimed at once, and returns how many it changed.
// Owners and epochs stay: the next claim bumps the epoch, which fences any
// straggler. Subscribers get a KindRunnable notification for each of those
// sessions that is runnable or has a wake time.
func (s *Store) LeaseExpireOwner(ctx context.Context, owner string, now time.Time) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	if err := checks.ID("owner", owner); err != nil {
		return 0, fmt.Errorf("expire leases: %w", err)
	}
	if err := checks.Time("now", now); err != nil {
		return 0, fmt.Errorf("expire leases of %s: %w", owner, err)
	}
	var expired int
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		expired = 0
		st, err := w.stmts.get(context.Background(), `UPDATE sessions SET lease_expires_at = ?
WHERE lease_owner = ? AND lease_expires_at > ?
RETURNING id, runnable, wake_at`)
		if err != nil {
			return nil, mapErr(err)
		}
		rows, err := st.QueryContext(context.Background(), toMicros(now), owner, toMicros(now))
		if err != nil {
			return nil, mapErr(err)
		}
		defer func() { _ = rows.Close() }()
		var notes []store.Notification
		for rows.Next() {
			var (
				id       string
				runnable int64
				wake     sql.NullInt64
			)
			if err := rows.Scan(&id, &runnable, &wake); err != nil {
				return nil, mapErr(err)
			}
			expired++
			if runnable != 0 || wake.Valid {
				notes = append(notes, store.Notification{Kind: store.KindRunnable, SessionID: id})
			}
		}
		if err := rows.Err(); err != nil {
			return nil, mapErr(err)
		}
		return notes, nil
	}})
	if err != nil {
		return 0, fmt.Errorf("expire leases of %s: %w", owner, err)
	}
	return expired, nil
}

// leaseLost explains why a lease update matched no row.
func (w *writer) leaseLost(l store.Lease) error {
	var (
		owner sql.NullString
		epoch int64
	)
	err := w.queryRow(`SELECT lease_owner, lease_epoch FROM sessions WHERE id = ?`, l.SessionID).Scan(&owner, &epoch)
	if err != nil {
		return mapErr(err)
	}
	return fmt.Errorf("%w: held by %q epoch %d, not %q epoch %d", store.ErrLeaseLost, owner.String, epoch, l.Owner, l.Epoch)
}

// Subscribe returns the notifications committed after the call until cancel
// is called, ctx ends or the store closes; each closes the channel. The
// channel holds Config.SubscriberBuffer notifications; a subscriber that
// falls further behind misses some and must re-read the store.
func (s *Store) Subscribe(ctx context.Context) (<-chan store.Notification, func()) {
	return s.hub.Subscribe(ctx)
}
