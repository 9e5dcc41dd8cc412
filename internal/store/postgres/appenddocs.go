package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// An append's docs are upserted by its one statement (appendSQL), one
// data-modifying CTE per kind present, each from arrays: a step's turn,
// effect and checkpoint cost the server no statement of their own to bind,
// start and end. Each CTE is queueDocs' upsert (upsertDocSQL) of many rows:
// a row whose id belongs to another session is not written, and the
// statement then fails (appendDocsCheck) with an error of its own, which
// docRefused explains.

// appendDocKinds orders the kinds in the statement (and in its variant's
// key: formIn).
var appendDocKinds = []store.DocKind{store.DocTurn, store.DocAction, store.DocEffect, store.DocArtifact, store.DocCheckpoint}

// codeLogOfZero is what appendDocsCheck raises when a doc was refused.
const codeLogOfZero = "2201E"

// errDocRefused: a doc of the append has the id of another session's (a
// conflict); docRefused reads which.
var errDocRefused = fmt.Errorf("%w: a doc's id belongs to another session", store.ErrConflict)

// appendStatements holds appendSQL's variants (appendStatement), built
// when first used: an int key each, of which few are ever used.
var appendStatements sync.Map

// appendStatementFor returns appendStatement(variant), built once.
func appendStatementFor(variant int) string {
	if s, ok := appendStatements.Load(variant); ok {
		return s.(string)
	}
	s, _ := appendStatements.LoadOrStore(variant, appendStatement(variant))
	return s.(string)
}

// A variant of appendSQL is the form of each of its tables' rows, two bits
// a table: the events' first, then each doc kind's in appendDocKinds'
// order (noRows for a kind the append does not write). formIn reads a
// table's form from a variant, withForm makes the bits that say it.
func formIn(variant, table int) rowsForm { return rowsForm(variant >> (2 * table) & 3) }

func withForm(table int, form rowsForm) int { return int(form) << (2 * table) }

// appendStatement is appendSQL for an append whose events and docs have
// variant's forms: after the session's update ($1-$12) and its events
// ($13-$19), each kind's arrays (id, status, doc, created_at, and type for
// actions) in appendDocKinds' order. The main query reads the update
// first, so its refusal (a division by zero) is raised before any doc is
// written; then the docs' CTEs, whose refusal is a logarithm of zero: one
// count of all their rows against all they were given, since each returns
// at most the rows it was given (one check for the server to set up, not
// one a kind).
func appendStatement(variant int) string {
	var b strings.Builder
	b.WriteString(appendSQL)
	cols, from := rowsFrom(formIn(variant, 0),
		[]string{"$13::bigint[]", "$14::text[]", "$15::timestamptz[]", "$16::text[]", "$17::bigint[]", "$18::text[]", "$19::text[]"})
	fmt.Fprintf(&b, "SELECT $8, %s, NULLIF(%s, '')::json%s)", strings.Join(cols[:6], ", "), cols[6], from)
	next := 20
	param := func(typ string) string {
		s := "$" + strconv.Itoa(next) + "::" + typ
		next++
		return s
	}
	var ctes, given []string
	for i, kind := range appendDocKinds {
		form := formIn(variant, i+1)
		if form == noRows {
			continue
		}
		table, cte := docTables[kind], "docs_"+string(kind)
		arrays := []string{param("text[]"), param("text[]"), param("text[]"), param("timestamptz[]")}
		names, set := "id, session_id, status, doc, created_at", "status = excluded.status, doc = excluded.doc"
		if kind == store.DocAction {
			names, set = names+", type", set+", type = excluded.type"
			arrays = append(arrays, param("text[]"))
		}
		cols, from := rowsFrom(form, arrays)
		fmt.Fprintf(&b, `,
%s AS (INSERT INTO %s (%s)
SELECT %s, $8, %s, NULLIF(%s, '')::json, %s%s
ON CONFLICT (id) DO UPDATE SET %s
WHERE %s.session_id = excluded.session_id
RETURNING 1)`, cte, table, names, cols[0], cols[1], cols[2], strings.Join(cols[3:], ", "), from, set, table)
		ctes = append(ctes, "SELECT FROM "+cte)
		given = append(given, rowCount(form, arrays))
	}
	b.WriteString("\nSELECT 1 / (SELECT count(*) FROM changed)")
	if len(ctes) > 0 {
		fmt.Fprintf(&b, ", ln(((SELECT count(*) FROM (%s) AS d) = %s)::int::float8)",
			strings.Join(ctes, " UNION ALL "), strings.Join(given, " + "))
	}
	return b.String()
}

// appendDocs returns the variant of appendSQL for docs (each kind's form)
// and its arguments after the events'. A doc written twice in one append is
// upserted once, as the two upserts one after another would leave it: the
// last status and document, the first creation time.
func appendDocs(docs []store.DocWrite) (variant int, args []any) {
	for i, kind := range appendDocKinds {
		var (
			ids, statuses, bodies []string
			types                 []*string
			created               []time.Time
			seen                  map[string]int
		)
		for j := range docs {
			d := &docs[j]
			if d.Kind != kind {
				continue
			}
			// No document is sent as "", stored as NULL (as the events'
			// data: eventColumns).
			body := string(d.Doc)
			var typ *string
			if kind == store.DocAction {
				if t, ok := docType(d.Doc).(string); ok {
					typ = &t
				}
			}
			if k, ok := seen[d.ID]; ok {
				statuses[k], bodies[k], types[k] = d.Status, body, typ
				continue
			}
			if seen == nil {
				seen = map[string]int{}
			}
			seen[d.ID] = len(ids)
			ids, statuses, bodies, types, created = append(ids, d.ID), append(statuses, d.Status),
				append(bodies, body), append(types, typ), append(created, d.CreatedAt)
		}
		if len(ids) == 0 {
			continue
		}
		form := formFor(len(ids))
		variant |= withForm(i+1, form)
		switch {
		case form == oneRow && kind == store.DocAction:
			args = append(args, ids[0], statuses[0], bodies[0], created[0], types[0])
		case form == oneRow:
			args = append(args, ids[0], statuses[0], bodies[0], created[0])
		case kind == store.DocAction:
			args = append(args, ids, statuses, bodies, created, types)
		default:
			args = append(args, ids, statuses, bodies, created)
		}
	}
	return variant, args
}

// onAppendRefused maps the failures of an append's statement: the
// session's condition (errAppendRefused) or a doc of another session
// (errDocRefused).
func onAppendRefused(qq *pgx.QueuedQuery) {
	qq.Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch pgErr.Code {
			case codeDivisionByZero:
				return errAppendRefused
			case codeLogOfZero:
				return errDocRefused
			}
		}
		return err
	}
}

// docRefused says which doc of p has the id of another session's, as
// queueDocs' refusal does.
func (s *Store) docRefused(ctx context.Context, docs []store.DocWrite, sessionID string) error {
	for i := range docs {
		d := &docs[i]
		var owner string
		err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&owner) },
			`SELECT session_id FROM `+docTables[d.Kind]+` WHERE id = $1`, d.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if owner != sessionID {
			return fmt.Errorf("upsert %s %s: %w: the id belongs to another session", d.Kind, d.ID, store.ErrConflict)
		}
	}
	return fmt.Errorf("upsert docs: %w: an id belonged to another session", store.ErrConflict)
}
