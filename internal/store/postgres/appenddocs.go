package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// appendDocKinds orders the kinds in the statement; a statement's variant
// is the set of kinds its append writes (a bit each), and manyRows.
var appendDocKinds = []store.DocKind{store.DocTurn, store.DocAction, store.DocEffect, store.DocArtifact, store.DocCheckpoint}

// codeLogOfZero is what appendDocsCheck raises when a doc was refused.
const codeLogOfZero = "2201E"

// errDocRefused: a doc of the append has the id of another session's (a
// conflict); docRefused reads which.
var errDocRefused = fmt.Errorf("%w: a doc's id belongs to another session", store.ErrConflict)

// maxSubscriptedRows is the most rows of one table (the events, or the
// docs of one kind) an append's statement reads from its arrays by
// subscript (appendFewEventsSQL); an append with more is the manyRows
// variant, which unnests them all.
const maxSubscriptedRows = 32

// manyRows marks an append's variant that unnests its arrays: one of its
// tables has more than maxSubscriptedRows rows. The bits below it are the
// set of the append's doc kinds.
var manyRows = 1 << len(appendDocKinds)

// appendStatements holds appendSQL's variants, one per set of doc kinds,
// twice: with few rows and with many (manyRows).
var appendStatements = func() []string {
	out := make([]string, 2*manyRows)
	for variant := range out {
		out[variant] = appendStatement(variant)
	}
	return out
}()

// appendStatement is appendSQL for an append whose docs are of the kinds
// in variant's set: after the session's update ($1-$12) and its events
// ($13-$19), each kind's arrays (id, status, doc, created_at, and type for
// actions) in appendDocKinds' order. The main query reads the update
// first, so its refusal (a division by zero) is raised before any doc is
// written; then the docs' CTEs, whose refusal is a logarithm of zero: one
// count of all their rows against all they were given, since each returns
// at most the rows it was given (one check for the server to set up, not
// one a kind).
func appendStatement(variant int) string {
	many := variant&manyRows != 0
	var b strings.Builder
	b.WriteString(appendSQL)
	if many {
		b.WriteString(appendEventsSQL)
	} else {
		b.WriteString(appendFewEventsSQL)
	}
	next := 20
	param := func(typ string) string {
		s := "$" + strconv.Itoa(next) + "::" + typ
		next++
		return s
	}
	var ctes, given []string
	for i, kind := range appendDocKinds {
		if variant&(1<<i) == 0 {
			continue
		}
		table, cte := docTables[kind], "docs_"+string(kind)
		ids, statuses, bodies, created := param("text[]"), param("text[]"), param("text[]"), param("timestamptz[]")
		cols, set := "id, session_id, status, doc, created_at", "status = excluded.status, doc = excluded.doc"
		arrays := []string{ids, statuses, bodies, created}
		if kind == store.DocAction {
			cols, set = cols+", type", set+", type = excluded.type"
			arrays = append(arrays, param("text[]"))
		}
		fmt.Fprintf(&b, `,
%s AS (INSERT INTO %s (%s)
%s
ON CONFLICT (id) DO UPDATE SET %s
WHERE %s.session_id = excluded.session_id
RETURNING 1)`, cte, table, cols, docRows(arrays, many), set, table)
		ctes = append(ctes, "SELECT FROM "+cte)
		given = append(given, "cardinality("+ids+")")
	}
	b.WriteString("\nSELECT 1 / (SELECT count(*) FROM changed)")
	if len(ctes) > 0 {
		fmt.Fprintf(&b, ", ln(((SELECT count(*) FROM (%s) AS d) = %s)::int::float8)",
			strings.Join(ctes, " UNION ALL "), strings.Join(given, " + "))
	}
	return b.String()
}

// docRows is the SELECT of a doc CTE's rows from its arrays (id, status,
// doc, created_at, and an action's type): unnested together, or, for an
// append of few rows, by subscript (as appendFewEventsSQL).
func docRows(arrays []string, many bool) string {
	if many {
		vals := "u.id, $8, u.status, NULLIF(u.doc, '')::json, u.created_at"
		as := "u(id, status, doc, created_at)"
		if len(arrays) == 5 {
			vals, as = vals+", u.type", "u(id, status, doc, created_at, type)"
		}
		return "SELECT " + vals + " FROM unnest(" + strings.Join(arrays, ", ") + ") AS " + as
	}
	at := func(k int) string { return "(" + arrays[k] + ")[i]" }
	vals := at(0) + ", $8, " + at(1) + ", NULLIF(" + at(2) + ", '')::json, " + at(3)
	if len(arrays) == 5 {
		vals += ", " + at(4)
	}
	return "SELECT " + vals + " FROM generate_subscripts(" + arrays[0] + ", 1) AS i"
}

// appendDocs returns the variant of appendSQL for docs (the set of their
// kinds, and manyRows if a kind has more than maxSubscriptedRows) and its
// arguments after the events'. A doc written twice in one append is
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
		variant |= 1 << i
		if len(ids) > maxSubscriptedRows {
			variant |= manyRows
		}
		args = append(args, ids, statuses, bodies, created)
		if kind == store.DocAction {
			args = append(args, types)
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
