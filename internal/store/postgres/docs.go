package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// docTables maps each projection kind to its table (the same in both
// drivers' schemas).
var docTables = storeutil.DocTables

// upsertDocSQL updates a row in place only if it belongs to the same session:
// ids are global (ArtifactGet takes an id alone), so an id reused by another
// session is a conflict, not an overwrite. The first created_at is kept.
// Actions also keep their document's type in a column of its own (the
// inbox filters on it; see 002_action_inbox.sql). The refusal is raised in
// the database (checkedSQL), so it aborts a batch that commits at its end.
var upsertDocSQL = func() map[store.DocKind]string {
	m := make(map[store.DocKind]string, len(docTables))
	for kind, table := range docTables {
		if kind == store.DocAction {
			continue
		}
		m[kind] = checkedSQL(`INSERT INTO ` + table + ` (id, session_id, status, doc, created_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc
WHERE ` + table + `.session_id = excluded.session_id`)
	}
	m[store.DocAction] = checkedSQL(`INSERT INTO actions (id, session_id, status, doc, created_at, type) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc, type = excluded.type
WHERE actions.session_id = excluded.session_id`)
	return m
}()

// docType is the "type" member of a document when it is a string (as
// SQLite's json_extract(doc, '$.type') compares it), else NULL.
func docType(doc json.RawMessage) any {
	var v struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(doc, &v) != nil || len(v.Type) == 0 || v.Type[0] != '"' {
		return nil
	}
	var typ string
	if json.Unmarshal(v.Type, &typ) != nil || checks.Text("type", typ) != nil {
		return nil
	}
	return typ
}

// queueDocs queues the upserts of docs, each refused with store.ErrConflict
// if its id belongs to another session.
func queueDocs(t *txn, docs []store.DocWrite) {
	for i := range docs {
		d := &docs[i]
		args := []any{d.ID, d.SessionID, d.Status, jsonArg(d.Doc), d.CreatedAt}
		if d.Kind == store.DocAction {
			args = append(args, docType(d.Doc))
		}
		onNoRow(t.queue(upsertDocSQL[d.Kind], args...), func() error {
			return fmt.Errorf("upsert %s %s: %w: the id belongs to another session", d.Kind, d.ID, store.ErrConflict)
		})
	}
}

const docColumns = `id, session_id, status, doc, created_at`

func scanDoc(sc rowScanner) (*store.DocRow, error) {
	var (
		d   store.DocRow
		doc []byte
	)
	if err := sc.Scan(&d.ID, &d.SessionID, &d.Status, &doc, &d.CreatedAt); err != nil {
		return nil, err
	}
	d.Doc = fromJSON(doc)
	d.CreatedAt = d.CreatedAt.UTC()
	return &d, nil
}

// queryDocs is storeutil.Projections.QueryList.
func (s *Store) queryDocs(ctx context.Context, kind store.DocKind, sessionID, status string) ([]*store.DocRow, error) {
	q := `SELECT ` + docColumns + ` FROM ` + docTables[kind] + ` WHERE session_id = $1`
	args := []any{sessionID}
	if status != "" {
		q += ` AND status = $2`
		args = append(args, status)
	}
	q += ` ORDER BY created_at, id`
	var out []*store.DocRow
	err := s.query(ctx, func(rows pgx.Rows) error {
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
	q := `SELECT ` + docColumns + ` FROM ` + docTables[kind] + ` WHERE id = $1`
	args := []any{id}
	if sessionID != "" {
		q += ` AND session_id = $2`
		args = append(args, sessionID)
	}
	var d *store.DocRow
	err := s.queryRow(ctx, func(row pgx.Row) (err error) {
		d, err = scanDoc(row)
		return err
	}, q, args...)
	return d, err
}
