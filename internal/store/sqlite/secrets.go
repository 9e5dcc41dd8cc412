package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// SecretPut creates the secret, or replaces it keeping its CreatedAt, and
// reports whether it created it. Subscribers hear store.KindSecrets.
func (s *Store) SecretPut(ctx context.Context, row *store.SecretRow) (bool, error) {
	if err := s.checkOpen(); err != nil {
		return false, err
	}
	if err := checks.SecretRow(row); err != nil {
		return false, fmt.Errorf("put secret: %w", err)
	}
	hosts, err := json.Marshal(row.Hosts)
	if err != nil {
		return false, fmt.Errorf("put secret %s: encode hosts: %w", row.Name, err)
	}
	var created bool
	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		// The writer runs one request at a time, so nothing can insert the
		// row between this read and the write below.
		var one int
		switch err := w.queryRow(`SELECT 1 FROM secrets WHERE project = ? AND name = ?`, row.Project, row.Name).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			created = true
		case err != nil:
			return nil, mapErr(err)
		default:
			created = false
		}
		if created {
			_, err := w.exec(`INSERT INTO secrets (project, name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				row.Project, row.Name, row.Ciphertext, row.Nonce, row.KeyID, string(hosts), string(row.Inject),
				toMicros(row.CreatedAt), toMicros(row.UpdatedAt))
			if err != nil {
				return nil, mapErr(err)
			}
		} else {
			_, err := w.exec(`UPDATE secrets SET ciphertext = ?, nonce = ?, key_id = ?, hosts = ?, inject = ?, updated_at = ?
WHERE project = ? AND name = ?`,
				row.Ciphertext, row.Nonce, row.KeyID, string(hosts), string(row.Inject),
				toMicros(row.UpdatedAt), row.Project, row.Name)
			if err != nil {
				return nil, mapErr(err)
			}
		}
		return []store.Notification{{Kind: store.KindSecrets}}, nil
	}})
	if err != nil {
		return false, fmt.Errorf("put secret %s of project %s: %w", row.Name, row.Project, err)
	}
	return created, nil
}

const secretColumns = `project, name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at`

func scanSecret(sc interface{ Scan(...any) error }) (*store.SecretRow, error) {
	var (
		r                store.SecretRow
		hosts, inject    string
		created, updated int64
	)
	if err := sc.Scan(&r.Project, &r.Name, &r.Ciphertext, &r.Nonce, &r.KeyID, &hosts, &inject, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(hosts), &r.Hosts); err != nil {
		return nil, fmt.Errorf("secret %s: stored hosts: %w", r.Name, err)
	}
	if r.Hosts == nil {
		r.Hosts = []string{}
	}
	r.Inject = json.RawMessage(inject)
	r.CreatedAt = fromMicros(created)
	r.UpdatedAt = fromMicros(updated)
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
	row, err := s.queryRow(ctx, `SELECT `+secretColumns+` FROM secrets WHERE project = ? AND name = ?`, project, name)
	if err != nil {
		return nil, fmt.Errorf("get secret %s of project %s: %w", name, project, err)
	}
	r, err := scanSecret(row)
	if err != nil {
		return nil, fmt.Errorf("get secret %s of project %s: %w", name, project, s.readErr(err))
	}
	return r, nil
}

// SecretList returns every secret of project ("": of every project), by
// project and name.
func (s *Store) SecretList(ctx context.Context, project string) ([]*store.SecretRow, error) {
	var out []*store.SecretRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		r, err := scanSecret(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, `SELECT `+secretColumns+` FROM secrets WHERE ? = '' OR project = ? ORDER BY project, name`, project, project)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// SecretDelete removes the secret name of project, or returns
// store.ErrNotFound. Subscribers hear store.KindSecrets.
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
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		n, err := w.changed(`DELETE FROM secrets WHERE project = ? AND name = ?`, project, name)
		if err != nil {
			return nil, mapErr(err)
		}
		if n == 0 {
			return nil, store.ErrNotFound
		}
		return []store.Notification{{Kind: store.KindSecrets}}, nil
	}})
	if err != nil {
		return fmt.Errorf("delete secret %s of project %s: %w", name, project, err)
	}
	return nil
}
