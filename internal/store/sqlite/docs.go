package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// docTables maps each projection kind to its table (the same in both
// drivers' schemas).
var docTables = storeutil.DocTables

// upsertDocSQL updates a row in place only if it belongs to the same session:
// ids are global (ArtifactGet takes an id alone), so an id reused by another
// session is a conflict, not an overwrite. The first created_at is kept.
var upsertDocSQL = func() map[store.DocKind]string {
	m := make(map[store.DocKind]string, len(docTables))
	for kind, table := range docTables {
		m[kind] = `INSERT INTO ` + table + ` (id, session_id, status, doc, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc
WHERE session_id = excluded.session_id`
	}
	return m
}()

func (w *writer) upsertDocs(docs []store.DocWrite) error {
	for i := range docs {
		d := &docs[i]
		n, err := w.changed(upsertDocSQL[d.Kind], d.ID, d.SessionID, d.Status, jsonText(d.Doc), toMicros(d.CreatedAt))
		if err != nil {
			return fmt.Errorf("upsert %s %s: %w", d.Kind, d.ID, mapErr(err))
		}
		if n == 0 {
			return fmt.Errorf("upsert %s %s: %w: the id belongs to another session", d.Kind, d.ID, store.ErrConflict)
		}
	}
	return nil
}

// queryDocs is storeutil.Projections.QueryList.
func (s *Store) queryDocs(ctx context.Context, kind store.DocKind, sessionID, status string) ([]*store.DocRow, error) {
	q := `SELECT id, session_id, status, doc, created_at FROM ` + docTables[kind] + ` WHERE session_id = ?`
	args := []any{sessionID}
	if status != "" {
		q += ` AND status = ?`
		args = append(args, status)
	}
	q += ` ORDER BY created_at, id`
	var out []*store.DocRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		d, err := scanDoc(rows)
		if err != nil {
			return err
		}
		out = append(out, d)
		return nil
	}, q, args...)
	return out, err
}

// queryDoc is storeutil.Projections.QueryGet.
func (s *Store) queryDoc(ctx context.Context, kind store.DocKind, sessionID, id string) (*store.DocRow, error) {
	q := `SELECT id, session_id, status, doc, created_at FROM ` + docTables[kind] + ` WHERE id = ?`
	args := []any{id}
	if sessionID != "" {
		q += ` AND session_id = ?`
		args = append(args, sessionID)
	}
	row, err := s.queryRow(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	d, err := scanDoc(row)
	if err != nil {
		return nil, s.readErr(err)
	}
	return d, nil
}

func scanDoc(sc interface{ Scan(...any) error }) (*store.DocRow, error) {
	var (
		d       store.DocRow
		doc     sql.NullString
		created int64
	)
	if err := sc.Scan(&d.ID, &d.SessionID, &d.Status, &doc, &created); err != nil {
		return nil, err
	}
	d.Doc = fromJSONText(doc)
	d.CreatedAt = fromMicros(created)
	return &d, nil
}
