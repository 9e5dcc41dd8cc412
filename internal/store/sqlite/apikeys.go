package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// APIKeyCreate stores a new key; store.ErrConflict if its id or token hash
// is taken.
func (s *Store) APIKeyCreate(ctx context.Context, row *store.APIKeyRow) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.APIKeyRow(row); err != nil {
		return fmt.Errorf("create API key: %w", err)
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		_, err := w.exec(`INSERT INTO api_keys (id, name, role, project, prefix, token_hash, created_at, last_used_at, expires_at, revoked_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			row.ID, row.Name, row.Role, row.Project, row.Prefix, row.TokenHash, toMicros(row.CreatedAt),
			nullMicros(row.LastUsedAt), nullMicros(row.ExpiresAt), nullMicros(row.RevokedAt))
		return nil, mapErr(err)
	}})
	if err != nil {
		return fmt.Errorf("create API key %s: %w", row.ID, err)
	}
	return nil
}

const apiKeyColumns = `id, name, role, project, prefix, token_hash, created_at, last_used_at, expires_at, revoked_at`

func scanAPIKey(sc interface{ Scan(...any) error }) (*store.APIKeyRow, error) {
	var (
		r                      store.APIKeyRow
		created                int64
		lastUsed, exp, revoked sql.NullInt64
	)
	if err := sc.Scan(&r.ID, &r.Name, &r.Role, &r.Project, &r.Prefix, &r.TokenHash, &created, &lastUsed, &exp, &revoked); err != nil {
		return nil, err
	}
	r.CreatedAt = fromMicros(created)
	r.LastUsedAt = fromNullMicros(lastUsed)
	r.ExpiresAt = fromNullMicros(exp)
	r.RevokedAt = fromNullMicros(revoked)
	return &r, nil
}

// APIKeyByHash returns the key whose token hashes to tokenHash, or
// store.ErrNotFound.
func (s *Store) APIKeyByHash(ctx context.Context, tokenHash string) (*store.APIKeyRow, error) {
	if err := checks.SHA256("token_hash", tokenHash); err != nil {
		return nil, fmt.Errorf("get API key: %w", err)
	}
	r, err := s.apiKeyWhere(ctx, "token_hash", tokenHash)
	if err != nil {
		return nil, fmt.Errorf("get API key by token hash: %w", err)
	}
	return r, nil
}

// APIKeyGet returns one key, or store.ErrNotFound.
func (s *Store) APIKeyGet(ctx context.Context, id string) (*store.APIKeyRow, error) {
	if err := checks.ID("id", id); err != nil {
		return nil, fmt.Errorf("get API key: %w", err)
	}
	r, err := s.apiKeyWhere(ctx, "id", id)
	if err != nil {
		return nil, fmt.Errorf("get API key %s: %w", id, err)
	}
	return r, nil
}

// apiKeyWhere reads the key whose column (a constant of this file) is v.
func (s *Store) apiKeyWhere(ctx context.Context, column, v string) (*store.APIKeyRow, error) {
	row, err := s.queryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE `+column+` = ?`, v)
	if err != nil {
		return nil, err
	}
	r, err := scanAPIKey(row)
	if err != nil {
		return nil, s.readErr(err)
	}
	return r, nil
}

// APIKeyList returns every key, oldest first.
func (s *Store) APIKeyList(ctx context.Context) ([]*store.APIKeyRow, error) {
	var out []*store.APIKeyRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		r, err := scanAPIKey(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+apiKeyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return out, nil
}

// APIKeyRevoke sets the key's revocation time unless it has one.
func (s *Store) APIKeyRevoke(ctx context.Context, id string, at time.Time) error {
	return s.apiKeyUpdate(ctx, "revoke", id, at,
		`UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`)
}

// APIKeyTouch moves the key's last use forward to at.
func (s *Store) APIKeyTouch(ctx context.Context, id string, at time.Time) error {
	return s.apiKeyUpdate(ctx, "touch", id, at,
		`UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, ?1), ?1) WHERE id = ?2`)
}

// apiKeyUpdate runs query (which sets a time from its first argument on the
// key of its second) and reports store.ErrNotFound if no key has the id.
func (s *Store) apiKeyUpdate(ctx context.Context, verb, id string, at time.Time, query string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.ID("id", id); err != nil {
		return fmt.Errorf("%s API key: %w", verb, err)
	}
	if err := checks.Time("at", at); err != nil {
		return fmt.Errorf("%s API key: %w", verb, err)
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		n, err := w.changed(query, toMicros(at), id)
		if err != nil {
			return nil, mapErr(err)
		}
		if n == 0 {
			return nil, store.ErrNotFound
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("%s API key %s: %w", verb, id, err)
	}
	return nil
}
