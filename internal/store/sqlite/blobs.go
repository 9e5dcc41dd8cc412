package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// insertBlobs stores blobs that are not stored yet (content addressing makes
// an existing one identical) and, when sessionID is set, records that the
// session refers to each (see BlobInProject).
func (w *writer) insertBlobs(sessionID string, blobs []store.BlobWrite) error {
	for i := range blobs {
		b := &blobs[i]
		data := storeutil.BlobData(b.Data)
		if _, err := w.exec(`INSERT OR IGNORE INTO blobs (sha256, size, data) VALUES (?, ?, ?)`,
			b.SHA256, len(data), data); err != nil {
			return fmt.Errorf("insert blob %s: %w", b.SHA256, mapErr(err))
		}
		if sessionID == "" {
			continue
		}
		if _, err := w.exec(`INSERT OR IGNORE INTO blob_refs (sha256, session_id) VALUES (?, ?)`,
			b.SHA256, sessionID); err != nil {
			return fmt.Errorf("refer to blob %s: %w", b.SHA256, mapErr(err))
		}
	}
	return nil
}

// BlobPut stores data under its SHA-256 (lowercase hex), which must match.
// Storing a blob again is a no-op.
func (s *Store) BlobPut(ctx context.Context, sha256Hex string, data []byte) error {
	if err := checks.Blob("sha256", sha256Hex, data); err != nil {
		return fmt.Errorf("put blob: %w", err)
	}
	return s.putBlobs(ctx, []store.BlobWrite{{SHA256: sha256Hex, Data: data}}, "blob "+sha256Hex)
}

// BlobPutMany stores blobs (digest to bytes) in one transaction; see
// store.Store.
func (s *Store) BlobPutMany(ctx context.Context, blobs map[string][]byte) error {
	writes, err := checks.BlobMap(blobs)
	if err != nil {
		return fmt.Errorf("put blobs: %w", err)
	}
	return s.putBlobs(ctx, writes, fmt.Sprintf("%d blobs", len(writes)))
}

// putBlobs stores checked blobs in one writer request (what names them
// in the error).
func (s *Store) putBlobs(ctx context.Context, writes []store.BlobWrite, what string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if len(writes) == 0 {
		return nil
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		return nil, w.insertBlobs("", writes)
	}})
	if err != nil {
		return fmt.Errorf("put %s: %w", what, err)
	}
	return nil
}

// BlobGet returns the bytes stored under a digest; store.ErrNotFound if none.
func (s *Store) BlobGet(ctx context.Context, sha256Hex string) ([]byte, error) {
	if err := checks.SHA256("sha256", sha256Hex); err != nil {
		return nil, fmt.Errorf("get blob: %w", err)
	}
	row, err := s.queryRow(ctx, `SELECT data FROM blobs WHERE sha256 = ?`, sha256Hex)
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", sha256Hex, err)
	}
	var data []byte
	if err := row.Scan(&data); err != nil {
		return nil, fmt.Errorf("get blob %s: %w", sha256Hex, s.readErr(err))
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
	has, err := s.exists(ctx, `SELECT 1 FROM blobs WHERE sha256 = ?`, sha256Hex)
	if err != nil {
		return false, fmt.Errorf("has blob %s: %w", sha256Hex, err)
	}
	return has, nil
}

// exists reports whether query (a SELECT 1 …) finds a row.
func (s *Store) exists(ctx context.Context, query string, args ...any) (bool, error) {
	row, err := s.queryRow(ctx, query, args...)
	if err != nil {
		return false, err
	}
	var one int
	switch err := s.readErr(row.Scan(&one)); {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}

// BlobInProject reports whether a session of project refers to the blob.
func (s *Store) BlobInProject(ctx context.Context, sha256Hex, project string) (bool, error) {
	if err := checks.SHA256("sha256", sha256Hex); err != nil {
		return false, fmt.Errorf("blob in project: %w", err)
	}
	if err := checks.ID("project", project); err != nil {
		return false, fmt.Errorf("blob in project: %w", err)
	}
	in, err := s.exists(ctx, `SELECT 1 FROM blob_refs r JOIN sessions s ON s.id = r.session_id
WHERE r.sha256 = ? AND s.project = ? LIMIT 1`, sha256Hex, project)
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
	r := *row
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		if _, err := w.exec(`INSERT INTO idempotency_keys (scope, key, body_sha256, status, response, created_at)
VALUES (?, ?, ?, ?, ?, ?)`, r.Scope, r.Key, r.BodySHA256, r.Status, r.Response, toMicros(r.CreatedAt)); err != nil {
			return nil, mapErr(err)
		}
		// The response answers every later run: whoever claimed the key,
		// its claim has nothing left to hold.
		_, err := w.exec(`DELETE FROM idempotency_claims WHERE scope = ? AND key = ?`, r.Scope, r.Key)
		return nil, mapErr(err)
	}})
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
	row, err := s.queryRow(ctx, `SELECT body_sha256, status, response, created_at FROM idempotency_keys
WHERE scope = ? AND key = ?`, scope, key)
	if err != nil {
		return nil, fmt.Errorf("get idempotency key %q in %q: %w", key, scope, err)
	}
	r := store.IdempotencyRow{Scope: scope, Key: key}
	var created int64
	if err := row.Scan(&r.BodySHA256, &r.Status, &r.Response, &created); err != nil {
		return nil, fmt.Errorf("get idempotency key %q in %q: %w", key, scope, s.readErr(err))
	}
	r.CreatedAt = fromMicros(created)
	return &r, nil
}

// IdempotencyClaim implements store.Store.
func (s *Store) IdempotencyClaim(ctx context.Context, c *store.IdempotencyClaim, now time.Time) (*store.IdempotencyClaimResult, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.IdempotencyClaim(c); err != nil {
		return nil, fmt.Errorf("claim idempotency key: %w", err)
	}
	var res *store.IdempotencyClaimResult
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		res = nil
		var rec store.IdempotencyRow
		var created int64
		err := w.queryRow(`SELECT body_sha256, status, response, created_at FROM idempotency_keys WHERE scope = ? AND key = ?`,
			c.Scope, c.Key).Scan(&rec.BodySHA256, &rec.Status, &rec.Response, &created)
		switch {
		case err == nil:
			rec.Scope, rec.Key, rec.CreatedAt = c.Scope, c.Key, fromMicros(created)
			res = &store.IdempotencyClaimResult{Record: &rec}
			return nil, nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, mapErr(err)
		}
		cur := store.IdempotencyClaim{Scope: c.Scope, Key: c.Key}
		var expires int64
		err = w.queryRow(`SELECT body_sha256, seed, token, owner, expires_at, created_at FROM idempotency_claims WHERE scope = ? AND key = ?`,
			c.Scope, c.Key).Scan(&cur.BodySHA256, &cur.Seed, &cur.Token, &cur.Owner, &expires, &created)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := w.exec(`INSERT INTO idempotency_claims (scope, key, body_sha256, seed, token, owner, expires_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.Scope, c.Key, c.BodySHA256, c.Seed, c.Token, c.Owner, toMicros(c.ExpiresAt), toMicros(c.CreatedAt)); err != nil {
				return nil, mapErr(err)
			}
			mine := *c
			res = &store.IdempotencyClaimResult{Claimed: &mine}
			return nil, nil
		case err != nil:
			return nil, mapErr(err)
		}
		cur.ExpiresAt, cur.CreatedAt = fromMicros(expires), fromMicros(created)
		if cur.BodySHA256 != c.BodySHA256 || cur.ExpiresAt.After(now) {
			res = &store.IdempotencyClaimResult{Held: &cur}
			return nil, nil
		}
		if _, err := w.exec(`UPDATE idempotency_claims SET token = ?, owner = ?, expires_at = ? WHERE scope = ? AND key = ?`,
			c.Token, c.Owner, toMicros(c.ExpiresAt), c.Scope, c.Key); err != nil {
			return nil, mapErr(err)
		}
		cur.Token, cur.Owner, cur.ExpiresAt = c.Token, c.Owner, c.ExpiresAt
		res = &store.IdempotencyClaimResult{Claimed: &cur}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("claim idempotency key %q in %q: %w", c.Key, c.Scope, err)
	}
	return res, nil
}

// IdempotencyRenew implements store.Store.
func (s *Store) IdempotencyRenew(ctx context.Context, scope, key, token string, expiresAt time.Time) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	var n int64
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var err error
		n, err = w.changed(`UPDATE idempotency_claims SET expires_at = ? WHERE scope = ? AND key = ? AND token = ?`,
			toMicros(expiresAt), scope, key, token)
		return nil, mapErr(err)
	}})
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
	if err := s.checkOpen(); err != nil {
		return err
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var err error
		if drop {
			_, err = w.exec(`DELETE FROM idempotency_claims WHERE scope = ? AND key = ? AND token = ?`, scope, key, token)
		} else {
			_, err = w.exec(`UPDATE idempotency_claims SET expires_at = ? WHERE scope = ? AND key = ? AND token = ?`,
				toMicros(now), scope, key, token)
		}
		return nil, mapErr(err)
	}})
	if err != nil {
		return fmt.Errorf("release the claim of idempotency key %q in %q: %w", key, scope, err)
	}
	return nil
}

// IdempotencyExpireOwner implements store.Store.
func (s *Store) IdempotencyExpireOwner(ctx context.Context, owner string, now time.Time) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	if err := checks.ID("owner", owner); err != nil {
		return 0, fmt.Errorf("expire idempotency claims: %w", err)
	}
	var n int64
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var err error
		n, err = w.changed(`UPDATE idempotency_claims SET expires_at = ? WHERE owner = ? AND expires_at > ?`,
			toMicros(now), owner, toMicros(now))
		return nil, mapErr(err)
	}})
	if err != nil {
		return 0, fmt.Errorf("expire the idempotency claims of %q: %w", owner, err)
	}
	return int(n), nil
}

// idempotencyPruneBatch is how many rows one transaction of
// IdempotencyPrune deletes: a few milliseconds of the writer, so that
// appends go on between its batches.
const idempotencyPruneBatch = 500

// IdempotencyPrune implements store.Store.
func (s *Store) IdempotencyPrune(ctx context.Context, before time.Time) (int64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	if err := checks.Time("before", before); err != nil {
		return 0, fmt.Errorf("prune idempotency keys: %w", err)
	}
	var total int64
	for _, q := range []string{
		`DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE created_at < ? LIMIT ?)`,
		`DELETE FROM idempotency_claims WHERE rowid IN (SELECT rowid FROM idempotency_claims WHERE expires_at < ? LIMIT ?)`,
	} {
		for {
			var n int64
			err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
				var err error
				n, err = w.changed(q, toMicros(before), idempotencyPruneBatch)
				return nil, mapErr(err)
			}})
			if err != nil {
				return total, fmt.Errorf("prune idempotency keys: %w", err)
			}
			total += n
			if n < idempotencyPruneBatch {
				break
			}
		}
	}
	return total, nil
}
