package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// secretPutSQL creates or replaces a secret in one statement, safe against
// concurrent puts of the same name (ON CONFLICT waits for the other insert
// and then updates). xmax is 0 only on a row this statement inserted, which
// is how it tells a creation from a replacement.
const secretPutSQL = `INSERT INTO secrets (project, name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (project, name) DO UPDATE SET ciphertext = excluded.ciphertext, nonce = excluded.nonce,
    key_id = excluded.key_id, hosts = excluded.hosts, inject = excluded.inject, updated_at = excluded.updated_at
RETURNING xmax = 0`

// SecretPut creates the secret, or replaces it keeping its CreatedAt, and
// reports whether it created it. Subscribers (on every node) hear
// store.KindSecrets.
func (s *Store) SecretPut(ctx context.Context, row *store.SecretRow) (bool, error) {
	if err := s.checkOpen(); err != nil {
		return false, err
	}
	if err := checks.SecretRow(row); err != nil {
		return false, fmt.Errorf("put secret: %w", err)
	}
	var created bool
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		t.queue(secretPutSQL, row.Project, row.Name, row.Ciphertext, row.Nonce, row.KeyID, storeutil.NonNil(row.Hosts), string(row.Inject),
			row.CreatedAt, row.UpdatedAt).QueryRow(func(r pgx.Row) error { return r.Scan(&created) })
		t.notify(store.Notification{Kind: store.KindSecrets})
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("put secret %s of project %s: %w", row.Name, row.Project, err)
	}
	return created, nil
}

const secretColumns = `project, name, ciphertext, nonce, key_id, hosts, inject::text, created_at, updated_at`

func scanSecret(sc rowScanner) (*store.SecretRow, error) {
	var (
		r      store.SecretRow
		inject string
	)
	if err := sc.Scan(&r.Project, &r.Name, &r.Ciphertext, &r.Nonce, &r.KeyID, &r.Hosts, &inject, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return nil, err
	}
	r.Hosts = storeutil.NonNil(r.Hosts)
	r.Inject = []byte(inject)
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	return &r, nil
}

// SecretGet returns the secret name of project, or store.ErrNotFound.
func (s *Store) SecretGet(ctx context.Context, project, name string) (*store.SecretRow, error) {
	if err := checks.ID("project", project); err != nil {
		return nil, fmt.Errorf("get secret: %w", err)
	}
	if err := checks.ID("name", name); err != nil {
		return nil, fmt.Errorf("get secret: %w", err)
	}
	var r *store.SecretRow
	err := s.queryRow(ctx, func(row pgx.Row) (err error) {
		r, err = scanSecret(row)
		return err
	}, `SELECT `+secretColumns+` FROM secrets WHERE project = $1 AND name = $2`, project, name)
	if err != nil {
		return nil, fmt.Errorf("get secret %s of project %s: %w", name, project, err)
	}
	return r, nil
}

// SecretList returns every secret of project ("": of every project), by
// project and name.
func (s *Store) SecretList(ctx context.Context, project string) ([]*store.SecretRow, error) {
	var out []*store.SecretRow
	err := s.query(ctx, func(rows pgx.Rows) error {
		r, err := scanSecret(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+secretColumns+` FROM secrets WHERE $1 = '' OR project = $1 ORDER BY project, name`, project)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// SecretDelete removes the secret name of project, or returns
// store.ErrNotFound. Subscribers (on every node) hear store.KindSecrets.
func (s *Store) SecretDelete(ctx context.Context, project, name string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checks.ID("project", project); err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	if err := checks.ID("name", name); err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		var deleted bool
		t.queue(`DELETE FROM secrets WHERE project = $1 AND name = $2`, project, name).Exec(func(ct pgconn.CommandTag) error {
			deleted = ct.RowsAffected() > 0
			return nil
		})
		if err := t.flush(ctx); err != nil {
			return err
		}
		if !deleted {
			return store.ErrNotFound
		}
		t.notify(store.Notification{Kind: store.KindSecrets})
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete secret %s of project %s: %w", name, project, err)
	}
	return nil
}
