package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

const insertBlobRefSQL = `INSERT INTO blob_refs (sha256, session_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`

const insertBlobSQL = `INSERT INTO blobs (sha256, size, data) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING`

// queueBlobs stores blobs that are not stored yet (content addressing makes
// an existing one identical) and records that the session refers to each
// (see BlobInProject).
func queueBlobs(t *txn, sessionID string, blobs []store.BlobWrite) {
	for i := range blobs {
		b := &blobs[i]
		data := storeutil.BlobData(b.Data)
		t.queue(insertBlobSQL, b.SHA256, len(data), data)
		t.queue(insertBlobRefSQL, b.SHA256, sessionID)
	}
}

// BlobPut stores data under its SHA-256 (lowercase hex), which must match.
// Storing a blob again is a no-op.
func (s *Store) BlobPut(ctx context.Context, sha256Hex string, data []byte) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.Blob("sha256", sha256Hex, data); err != nil {
		return fmt.Errorf("put blob: %w", err)
	}
	data = storeutil.BlobData(data)
	if _, err := s.exec(ctx, insertBlobSQL, sha256Hex, len(data), data); err != nil {
		return fmt.Errorf("put blob %s: %w", sha256Hex, err)
	}
	return nil
}

// BlobPutMany stores blobs (digest to bytes) in one transaction, sent as
// one batch; see store.Store.
func (s *Store) BlobPutMany(ctx context.Context, blobs map[string][]byte) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	writes, err := checks.BlobMap(blobs)
	if err != nil {
		return fmt.Errorf("put blobs: %w", err)
	}
	if len(writes) == 0 {
		return nil
	}
	err = s.write(ctx, func(_ context.Context, t *txn) error {
		for i := range writes {
			data := storeutil.BlobData(writes[i].Data)
			t.queue(insertBlobSQL, writes[i].SHA256, len(data), data)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put %d blobs: %w", len(writes), err)
	}
	return nil
}

// BlobGet returns the bytes stored under a digest; store.ErrNotFound if none.
func (s *Store) BlobGet(ctx context.Context, sha256Hex string) ([]byte, error) {
	if err := checks.SHA256("sha256", sha256Hex); err != nil {
		return nil, fmt.Errorf("get blob: %w", err)
	}
	var data []byte
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&data) },
		`SELECT data FROM blobs WHERE sha256 = $1`, sha256Hex)
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", sha256Hex, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// BlobHas reports whether a blob is stored under a digest.
func (s *Store) BlobHas(ctx context.Context, sha256Hex string) (bool, error) {
	if err := checks.SHA256("sha256", sha256Hex); err != nil {
		return false, fmt.Errorf("has blob: %w", err)
	}
	var has bool
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&has) },
		`SELECT EXISTS (SELECT 1 FROM blobs WHERE sha256 = $1)`, sha256Hex)
	if err != nil {
		return false, fmt.Errorf("has blob %s: %w", sha256Hex, err)
	}
	return has, nil
}

// BlobInProject reports whether a session of project refers to the blob.
func (s *Store) BlobInProject(ctx context.Context, sha256Hex, project string) (bool, error) {
	if err := checks.SHA256("sha256", sha256Hex); err != nil {
		return false, fmt.Errorf("blob in project: %w", err)
	}
	if err := checks.ID("project", project); err != nil {
		return false, fmt.Errorf("blob in project: %w", err)
	}
	var in bool
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&in) },
		`SELECT EXISTS (SELECT 1 FROM blob_refs r JOIN sessions s ON s.id = r.session_id
WHERE r.sha256 = $1 AND s.project = $2)`, sha256Hex, project)
	if err != nil {
		return false, fmt.Errorf("blob %s in project %q: %w", sha256Hex, project, err)
	}
	return in, nil
}

// IdempotencyPut stores the first response to an idempotent request;
// store.ErrConflict if (scope, key) is already stored.
func (s *Store) IdempotencyPut(ctx context.Context, row *store.IdempotencyRow) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.Idempotency(row); err != nil {
		return fmt.Errorf("put idempotency key: %w", err)
	}
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		t.queue(`INSERT INTO idempotency_keys (scope, key, body_sha256, status, response, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`, row.Scope, row.Key, row.BodySHA256, row.Status, row.Response, row.CreatedAt)
		// The response answers every later run: whoever claimed the key,
		// its claim has nothing left to hold.
		t.queue(`DELETE FROM idempotency_claims WHERE scope = $1 AND key = $2`, row.Scope, row.Key)
		return nil
	})
	if err != nil {
		return fmt.Errorf("put idempotency key %q in %q: %w", row.Key, row.Scope, err)
	}
	return nil
}

// IdempotencyGet returns the stored response for (scope, key);
// store.ErrNotFound if none.
func (s *Store) IdempotencyGet(ctx context.Context, scope, key string) (*store.IdempotencyRow, error) {
	if err := checks.ID("scope", scope); err != nil {
		return nil, fmt.Errorf("get idempotency key: %w", err)
	}
	if err := checks.ID("key", key); err != nil {
		return nil, fmt.Errorf("get idempotency key: %w", err)
	}
	r := store.IdempotencyRow{Scope: scope, Key: key}
	err := s.queryRow(ctx, func(row pgx.Row) error {
		return row.Scan(&r.BodySHA256, &r.Status, &r.Response, &r.CreatedAt)
	}, `SELECT body_sha256, status, response, created_at FROM idempotency_keys WHERE scope = $1 AND key = $2`, scope, key)
	if err != nil {
		return nil, fmt.Errorf("get idempotency key %q in %q: %w", key, scope, err)
	}
	r.CreatedAt = r.CreatedAt.UTC()
	return &r, nil
}

// IdempotencyClaim implements store.Store. The claim is written before the
// record is looked for, in one transaction: a run that records its response
// (IdempotencyPut, which drops the claim) either commits before this
// statement, and its record is seen, or holds the claim's row, which this
// statement waits for.
func (s *Store) IdempotencyClaim(ctx context.Context, c *store.IdempotencyClaim, now time.Time) (*store.IdempotencyClaimResult, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.IdempotencyClaim(c); err != nil {
		return nil, fmt.Errorf("claim idempotency key: %w", err)
	}
	var res *store.IdempotencyClaimResult
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		res = nil
		var claimed, held *store.IdempotencyClaim
		var rec *store.IdempotencyRow
		// An expired claim with the same body is taken over, its seed
		// kept; any other is held (the row stays locked all the same).
		t.queue(`INSERT INTO idempotency_claims AS c (scope, key, body_sha256, seed, token, owner, expires_at, created_at)
VALUES ($1, $2, $3, $4, $5, $9, $6, $7)
ON CONFLICT (scope, key) DO UPDATE SET token = EXCLUDED.token, owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
WHERE c.expires_at <= $8 AND c.body_sha256 = EXCLUDED.body_sha256
RETURNING seed, created_at`, c.Scope, c.Key, c.BodySHA256, c.Seed, c.Token, c.ExpiresAt, c.CreatedAt, now, c.Owner).
			QueryRow(func(r pgx.Row) error {
				mine := *c
				if err := r.Scan(&mine.Seed, &mine.CreatedAt); err != nil {
					return noRowIsNil(err)
				}
				mine.CreatedAt = mine.CreatedAt.UTC()
				claimed = &mine
				return nil
			})
		t.queue(`SELECT body_sha256, seed, token, owner, expires_at, created_at FROM idempotency_claims WHERE scope = $1 AND key = $2`, c.Scope, c.Key).
			QueryRow(func(r pgx.Row) error {
				cur := store.IdempotencyClaim{Scope: c.Scope, Key: c.Key}
				if err := r.Scan(&cur.BodySHA256, &cur.Seed, &cur.Token, &cur.Owner, &cur.ExpiresAt, &cur.CreatedAt); err != nil {
					return noRowIsNil(err)
				}
				cur.ExpiresAt, cur.CreatedAt = cur.ExpiresAt.UTC(), cur.CreatedAt.UTC()
				held = &cur
				return nil
			})
		t.queue(`SELECT body_sha256, status, response, created_at FROM idempotency_keys WHERE scope = $1 AND key = $2`, c.Scope, c.Key).
			QueryRow(func(r pgx.Row) error {
				got := store.IdempotencyRow{Scope: c.Scope, Key: c.Key}
				if err := r.Scan(&got.BodySHA256, &got.Status, &got.Response, &got.CreatedAt); err != nil {
					return noRowIsNil(err)
				}
				got.CreatedAt = got.CreatedAt.UTC()
				rec = &got
				return nil
			})
		if err := t.flush(ctx); err != nil {
			return err
		}
		switch {
		case rec != nil:
			// Recorded by a run of a node of the previous release, which
			// claims nothing: the claim just made holds nothing.
			if claimed != nil {
				t.queue(`DELETE FROM idempotency_claims WHERE scope = $1 AND key = $2 AND token = $3`, c.Scope, c.Key, c.Token)
			}
			res = &store.IdempotencyClaimResult{Record: rec}
		case claimed != nil:
			res = &store.IdempotencyClaimResult{Claimed: claimed}
		case held != nil:
			res = &store.IdempotencyClaimResult{Held: held}
		default:
			return fmt.Errorf("the claim of idempotency key %q in %q was neither written nor found", c.Key, c.Scope)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim idempotency key %q in %q: %w", c.Key, c.Scope, err)
	}
	return res, nil
}

// noRowIsNil is a scan's error, with no row not one.
func noRowIsNil(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// IdempotencyRenew implements store.Store.
func (s *Store) IdempotencyRenew(ctx context.Context, scope, key, token string, expiresAt time.Time) error {
	n, err := s.exec(ctx, `UPDATE idempotency_claims SET expires_at = $4 WHERE scope = $1 AND key = $2 AND token = $3`,
		scope, key, token, expiresAt)
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("renew the claim of idempotency key %q in %q: %w", key, scope, err)
	}
	return nil
}

// IdempotencyRelease implements store.Store.
func (s *Store) IdempotencyRelease(ctx context.Context, scope, key, token string, drop bool, now time.Time) error {
	var err error
	if drop {
		_, err = s.exec(ctx, `DELETE FROM idempotency_claims WHERE scope = $1 AND key = $2 AND token = $3`, scope, key, token)
	} else {
		_, err = s.exec(ctx, `UPDATE idempotency_claims SET expires_at = $4 WHERE scope = $1 AND key = $2 AND token = $3`,
			scope, key, token, now)
	}
	if err != nil {
		return fmt.Errorf("release the claim of idempotency key %q in %q: %w", key, scope, err)
	}
	return nil
}

// IdempotencyExpireOwner implements store.Store.
func (s *Store) IdempotencyExpireOwner(ctx context.Context, owner string, now time.Time) (int, error) {
	if err := checks.ID("owner", owner); err != nil {
		return 0, fmt.Errorf("expire idempotency claims: %w", err)
	}
	n, err := s.exec(ctx, `UPDATE idempotency_claims SET expires_at = $2 WHERE owner = $1 AND expires_at > $2`, owner, now)
	if err != nil {
		return 0, fmt.Errorf("expire the idempotency claims of %q: %w", owner, err)
	}
	return int(n), nil
}

// idempotencyPruneBatch is how many rows one statement of
// IdempotencyPrune deletes: each is its own transaction, short enough to
// hold no lock for long.
const idempotencyPruneBatch = 1000

// IdempotencyPrune implements store.Store. Prunes on several nodes at
// once may pick the same rows: a row another deleted first is skipped
// (the DELETE rechecks it after the other's commit), so each is deleted
// once and none fails. A claim is deleted only if it is still lapsed when
// its row is deleted: the sub-select reads the rows as they were when the
// statement began, and a run may have taken the claim over since.
func (s *Store) IdempotencyPrune(ctx context.Context, before time.Time) (int64, error) {
	if err := checks.Time("before", before); err != nil {
		return 0, fmt.Errorf("prune idempotency keys: %w", err)
	}
	var total int64
	for _, q := range []string{
		`DELETE FROM idempotency_keys WHERE (scope, key) IN (SELECT scope, key FROM idempotency_keys WHERE created_at < $1 LIMIT $2)`,
		`DELETE FROM idempotency_claims WHERE (scope, key) IN (SELECT scope, key FROM idempotency_claims WHERE expires_at < $1 LIMIT $2) AND expires_at < $1`,
	} {
		for {
			n, err := s.exec(ctx, q, before, idempotencyPruneBatch)
			if err != nil {
				return total, fmt.Errorf("prune idempotency keys: %w", err)
			}
			total += n
			// Until a statement finds nothing: a short batch is not the
			// end when a prune on another node took part of it.
			if n == 0 {
				break
			}
		}
	}
	return total, nil
}
