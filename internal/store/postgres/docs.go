package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// docTables maps each projection kind to its table. The names are constants,
// so building SQL from them is safe.
var docTables = map[store.DocKind]string{
	store.DocTurn:       "turns",
	store.DocAction:     "actions",
	store.DocEffect:     "effects",
	store.DocArtifact:   "artifacts",
	store.DocCheckpoint: "checkpoints",
}

// upsertDocSQL updates a row in place only if it belongs to the same session:
// ids are global (ArtifactGet takes an id alone), so an id reused by another
// session is a conflict, not an overwrite. The first created_at is kept.
// Actions also keep their document's type in a column of its own (the
// inbox filters on it; see 002_action_inbox.sql).
var upsertDocSQL = func() map[store.DocKind]string {
	m := make(map[store.DocKind]string, len(docTables))
	for kind, table := range docTables {
		if kind == store.DocAction {
			continue
		}
		m[kind] = `INSERT INTO ` + table + ` (id, session_id, status, doc, created_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc
WHERE ` + table + `.session_id = excluded.session_id`
	}
	m[store.DocAction] = `INSERT INTO actions (id, session_id, status, doc, created_at, type) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc, type = excluded.type
WHERE actions.session_id = excluded.session_id`
	return m
}()

// normalizeDocs fills an empty SessionID with the written session's id. A doc
// of another session is refused: a write changes one session only.
func normalizeDocs(sessionID string, docs []store.DocWrite) ([]store.DocWrite, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	out := make([]store.DocWrite, len(docs))
	for i, d := range docs {
		switch d.SessionID {
		case "":
			d.SessionID = sessionID
		case sessionID:
		default:
			return nil, fmt.Errorf("docs[%d].session_id %q is not the written session %q", i, d.SessionID, sessionID)
		}
		out[i] = d
	}
	return out, nil
}

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
		t.queue(upsertDocSQL[d.Kind], args...).Exec(func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() == 0 {
				return fmt.Errorf("upsert %s %s: %w: the id belongs to another session", d.Kind, d.ID, store.ErrConflict)
			}
			return nil
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

func (s *Store) docList(ctx context.Context, kind store.DocKind, sessionID, status string) ([]*store.DocRow, error) {
	if err := checks.ID("session_id", sessionID); err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, err)
	}
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
	if err != nil {
		return nil, fmt.Errorf("list %ss of session %s: %w", kind, sessionID, err)
	}
	if len(out) == 0 {
		if err := s.sessionExists(ctx, sessionID); err != nil {
			return nil, fmt.Errorf("list %ss: %w", kind, err)
		}
	}
	return out, nil
}

// docGet returns one row by id, and only if it belongs to sessionID when
// sessionID is not empty.
func (s *Store) docGet(ctx context.Context, kind store.DocKind, sessionID, id string) (*store.DocRow, error) {
	if err := checks.ID("id", id); err != nil {
		return nil, fmt.Errorf("get %s: %w", kind, err)
	}
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
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", kind, id, err)
	}
	return d, nil
}

// Projection reads. Lists are in creation order (created_at, then id) and
// return store.ErrNotFound for an unknown session; gets return
// store.ErrNotFound for an unknown id (or one of another session).

// TurnList returns a session's turns.
func (s *Store) TurnList(ctx context.Context, sessionID string) ([]*store.DocRow, error) {
	return s.docList(ctx, store.DocTurn, sessionID, "")
}

// TurnGet returns one turn of a session.
func (s *Store) TurnGet(ctx context.Context, sessionID, turnID string) (*store.DocRow, error) {
	if err := checks.ID("session_id", sessionID); err != nil {
		return nil, fmt.Errorf("get turn: %w", err)
	}
	return s.docGet(ctx, store.DocTurn, sessionID, turnID)
}

// ActionList returns a session's required actions, those with status only
// unless status is "".
func (s *Store) ActionList(ctx context.Context, sessionID string, status string) ([]*store.DocRow, error) {
	return s.docList(ctx, store.DocAction, sessionID, status)
}

// ActionGet returns one required action of a session.
func (s *Store) ActionGet(ctx context.Context, sessionID, actionID string) (*store.DocRow, error) {
	if err := checks.ID("session_id", sessionID); err != nil {
		return nil, fmt.Errorf("get action: %w", err)
	}
	return s.docGet(ctx, store.DocAction, sessionID, actionID)
}

// EffectList returns a session's effect ledger.
func (s *Store) EffectList(ctx context.Context, sessionID string) ([]*store.DocRow, error) {
	return s.docList(ctx, store.DocEffect, sessionID, "")
}

// ArtifactList returns a session's artifacts.
func (s *Store) ArtifactList(ctx context.Context, sessionID string) ([]*store.DocRow, error) {
	return s.docList(ctx, store.DocArtifact, sessionID, "")
}

// ArtifactGet returns an artifact by its id alone.
func (s *Store) ArtifactGet(ctx context.Context, artifactID string) (*store.DocRow, error) {
	return s.docGet(ctx, store.DocArtifact, "", artifactID)
}

// CheckpointList returns a session's checkpoints.
func (s *Store) CheckpointList(ctx context.Context, sessionID string) ([]*store.DocRow, error) {
	return s.docList(ctx, store.DocCheckpoint, sessionID, "")
}
