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

// positionedDocs are the kinds whose rows are found by their positions in
// their session's range of the table's rowids, num << 32 | k
// (028_doc_positions): the two a step inserts. The others are listed
// through their index on (session_id, created_at, id).
var positionedDocs = map[store.DocKind]bool{store.DocEffect: true, store.DocCheckpoint: true}

// upsertDocSQL updates a row in place only if it belongs to the same session:
// ids are global (ArtifactGet takes an id alone), so an id reused by another
// session is a conflict, not an overwrite. The first created_at is kept, and
// a positioned row's place: a new one takes the place after the last of its
// session's range (?6 is the session's number), which the table's rowid
// finds at once; an update never moves it. A session's range holds four
// billion places, far more than any session writes; a new row that finds
// the last one taken takes it again, and its rowid refuses it, rather than
// going past the range, where no session's list would find it.
var upsertDocSQL = func() map[store.DocKind]string {
	m := make(map[store.DocKind]string, len(docTables))
	for kind, table := range docTables {
		const onConflict = `
ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc
WHERE session_id = excluded.session_id`
		if positionedDocs[kind] {
			m[kind] = positions.Replace(`INSERT INTO ` + table + ` (rowid, id, session_id, status, doc, created_at)
VALUES ((SELECT min(coalesce(max(rowid), ?6 << BITS) + 1, (?6 << BITS) + MAXSEQ) FROM ` + table + `
        WHERE rowid > ?6 << BITS AND rowid <= (?6 << BITS) + MAXSEQ),
    ?1, ?2, ?3, ?4, ?5)` + onConflict)
			continue
		}
		m[kind] = `INSERT INTO ` + table + ` (id, session_id, status, doc, created_at) VALUES (?1, ?2, ?3, ?4, ?5)` + onConflict
	}
	return m
}()

// upsertDocs writes the docs of the session numbered num.
func (w *writer) upsertDocs(num int64, docs []store.DocWrite) error {
	for i := range docs {
		d := &docs[i]
		args := []any{d.ID, d.SessionID, d.Status, jsonText(d.Doc), toMicros(d.CreatedAt), num}
		if !positionedDocs[d.Kind] {
			args = args[:5] // its statement has no ?6
		}
		n, err := w.changed(upsertDocSQL[d.Kind], args...)
		if err != nil {
			return fmt.Errorf("upsert %s %s: %w", d.Kind, d.ID, mapErr(err))
		}
		if n == 0 {
			return fmt.Errorf("upsert %s %s: %w: the id belongs to another session", d.Kind, d.ID, store.ErrConflict)
		}
	}
	return nil
}

// listDocsSQL lists a session's rows of each kind, and listDocsOfStatusSQL
// those with a status, in creation order: a positioned kind's as the range
// of its session's number, looked up once by the subquery, and sorted (its
// places are in the order of the writes, which a clock set back could make
// another); the others' through their index by session.
var listDocsSQL, listDocsOfStatusSQL = func() (all, ofStatus map[store.DocKind]string) {
	all, ofStatus = make(map[store.DocKind]string), make(map[store.DocKind]string)
	for kind, table := range docTables {
		q := `SELECT id, session_id, status, doc, created_at FROM ` + table + ` WHERE session_id = ?1`
		if positionedDocs[kind] {
			q = positions.Replace(`WITH s (num) AS (SELECT num FROM sessions WHERE id = ?1)
SELECT d.id, d.session_id, d.status, d.doc, d.created_at FROM s, ` + table + ` d
WHERE d.rowid > s.num << BITS AND d.rowid <= (s.num << BITS) + MAXSEQ`)
		}
		all[kind] = q + ` ORDER BY created_at, id`
		ofStatus[kind] = q + ` AND status = ?2 ORDER BY created_at, id`
	}
	return all, ofStatus
}()

// queryDocs is storeutil.Projections.QueryList.
func (s *Store) queryDocs(ctx context.Context, kind store.DocKind, sessionID, status string) ([]*store.DocRow, error) {
	q, args := listDocsSQL[kind], []any{sessionID}
	if status != "" {
		q, args = listDocsOfStatusSQL[kind], append(args, status)
	}
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
