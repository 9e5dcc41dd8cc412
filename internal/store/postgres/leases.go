package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// claimSQL claims, in one statement, up to $2 sessions that are claimable at
// $1 (runnable, or their wake time has come; and no owner, or the lease
// expired), oldest wake first: runnable ones by their wake time if they have
// one, else their last update; woken ones by their wake time. FOR UPDATE SKIP
// LOCKED makes concurrent claims take disjoint rows without waiting for each
// other; a row another claim committed meanwhile is re-checked after it is
// locked, so it is left out once its new lease is live. The two halves of
// the WHERE clause match the partial indexes sessions_runnable and
// sessions_wake. The owner of an expired lease comes along (as read once
// the row is locked): the claim takes the session over from it.
const claimSQL = `WITH claimable AS (
    SELECT id, lease_owner FROM sessions
    WHERE (runnable OR wake_at <= $1) AND (lease_owner IS NULL OR lease_expires_at <= $1)
        AND (claim_node IS NULL OR claim_node = $3 OR claim_node_until <= $1)
    ORDER BY CASE WHEN runnable THEN coalesce(wake_at, updated_at) ELSE wake_at END, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE sessions s SET lease_owner = $3, lease_expires_at = $4, lease_epoch = s.lease_epoch + 1,
    claim_node = NULL, claim_node_until = NULL
FROM claimable c WHERE s.id = c.id
RETURNING s.id, s.lease_epoch, c.lease_owner, CASE WHEN s.runnable THEN coalesce(s.wake_at, s.updated_at) ELSE s.wake_at END`

// LeaseClaim claims up to p.Limit (at most 1000) claimable sessions for
// p.Owner until p.ExpiresAt, bumping each one's epoch, and returns the
// leases oldest wake first. A session is claimable when it is runnable or its
// wake time is at or before p.Now, and it has no owner or its lease expired
// at or before p.Now, and it was not handed over to another node than
// p.Owner until after p.Now (LeaseHandOver). Nodes claiming at once get
// disjoint sessions.
func (s *Store) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]store.Lease, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.LeaseClaim(p); err != nil {
		return nil, fmt.Errorf("claim sessions: %w", err)
	}
	type claimed struct {
		lease store.Lease
		key   time.Time
	}
	var out []claimed
	expires := stored(p.ExpiresAt)
	err := s.query(ctx, func(rows pgx.Rows) error {
		c := claimed{lease: store.Lease{Owner: p.Owner, ExpiresAt: expires}}
		var previous *string
		if err := rows.Scan(&c.lease.SessionID, &c.lease.Epoch, &previous, &c.key); err != nil {
			return err
		}
		if previous != nil {
			c.lease.PreviousOwner = *previous
		}
		out = append(out, c)
		return nil
	}, claimSQL, p.Now, p.Limit, p.Owner, p.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("claim sessions for %s: %w", p.Owner, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	// RETURNING has no order; ids compare as bytes, as COLLATE "C" does.
	slices.SortFunc(out, func(a, b claimed) int {
		if c := a.key.Compare(b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.lease.SessionID, b.lease.SessionID)
	})
	leases := make([]store.Lease, len(out))
	for i, c := range out {
		leases[i] = c.lease
	}
	return leases, nil
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
	n, err := s.exec(ctx, `UPDATE sessions SET lease_expires_at = $1
WHERE id = $2 AND lease_owner = $3 AND lease_epoch = $4`, expiresAt, l.SessionID, l.Owner, l.Epoch)
	if err == nil && n == 0 {
		err = s.leaseLost(ctx, l)
	}
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
	u := stored(until)
	return s.release(ctx, l, &node, &u)
}

// release clears l's lease and sets the session's hand-over (nil: none).
func (s *Store) release(ctx context.Context, l store.Lease, node *string, until *time.Time) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.Lease(l); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	// One statement on its own: a single round trip, committed at once.
	var claimable bool
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&claimable) },
		`UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL, claim_node = $4, claim_node_until = $5
WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3 RETURNING runnable OR wake_at IS NOT NULL`,
		l.SessionID, l.Owner, l.Epoch, node, until)
	if errors.Is(err, store.ErrNotFound) {
		err = s.leaseLost(ctx, l)
	}
	if err != nil {
		return fmt.Errorf("release lease on session %s: %w", l.SessionID, err)
	}
	if claimable {
		s.publish([]store.Notification{{Kind: store.KindRunnable, SessionID: l.SessionID}}, nil)
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
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		expired = 0
		t.queue(`UPDATE sessions SET lease_expires_at = $1
WHERE lease_owner = $2 AND lease_expires_at > $1
RETURNING id, runnable OR wake_at IS NOT NULL`, now, owner).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					id        string
					claimable bool
				)
				if err := rows.Scan(&id, &claimable); err != nil {
					return err
				}
				expired++
				if claimable {
					t.notify(store.Notification{Kind: store.KindRunnable, SessionID: id})
				}
			}
			return rows.Err()
		})
		return t.flush(ctx)
	})
	if err != nil {
		return 0, fmt.Errorf("expire leases of %s: %w", owner, err)
	}
	return expired, nil
}

const leaseSQL = `SELECT lease_owner, lease_epoch FROM sessions WHERE id = $1`

// leaseLost explains why a lease update matched no row.
func (s *Store) leaseLost(ctx context.Context, l store.Lease) error {
	var (
		owner *string
		epoch int64
	)
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&owner, &epoch) }, leaseSQL, l.SessionID)
	if err != nil {
		return err
	}
	return lostError(l, owner, epoch)
}

func lostError(l store.Lease, owner *string, epoch int64) error {
	held := ""
	if owner != nil {
		held = *owner
	}
	return fmt.Errorf("%w: held by %q epoch %d, not %q epoch %d", store.ErrLeaseLost, held, epoch, l.Owner, l.Epoch)
}
