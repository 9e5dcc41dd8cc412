package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// An append's docs are upserted by its one statement, a CTE per kind: a doc
// written twice in one append ends as two upserts one after another leave
// it (the last status and document, the first creation time), and an
// action keeps its document's type.
func TestAppendDocsInOneStatement(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	createSession(t, s, "ses_a", false)
	later := testTime.Add(time.Minute)
	doc := func(kind store.DocKind, id, status, body string, at time.Time) store.DocWrite {
		return store.DocWrite{Kind: kind, ID: id, Status: status, Doc: json.RawMessage(body), CreatedAt: at}
	}
	p := appendParams("ses_a", 1, 2)
	p.Docs = []store.DocWrite{
		doc(store.DocTurn, "turn_1", "queued", `{"n":1}`, testTime),
		doc(store.DocAction, "act_1", "pending", `{"type":"approval"}`, testTime),
		doc(store.DocEffect, "eff_1", "done", `{}`, testTime),
		doc(store.DocTurn, "turn_1", "running", `{"n":2}`, later),
		doc(store.DocCheckpoint, "chk_1", "done", `{}`, testTime),
		doc(store.DocArtifact, "art_1", "final", `{}`, testTime),
	}
	_, err := s.EventAppend(t.Context(), p)
	require.NoError(t, err)

	turn, err := s.TurnGet(t.Context(), "ses_a", "turn_1")
	require.NoError(t, err)
	require.Equal(t, "running", turn.Status)
	require.JSONEq(t, `{"n":2}`, string(turn.Doc))
	require.Equal(t, testTime, turn.CreatedAt, "the first write's creation time")
	for kind, id := range map[store.DocKind]string{store.DocEffect: "eff_1", store.DocCheckpoint: "chk_1", store.DocArtifact: "art_1"} {
		var n int
		require.NoError(t, s.queryRow(t.Context(), func(row pgx.Row) error { return row.Scan(&n) },
			`SELECT count(*) FROM `+docTables[kind]+` WHERE id = $1 AND session_id = 'ses_a'`, id))
		require.Equal(t, 1, n, id)
	}
	var typ string
	require.NoError(t, s.queryRow(t.Context(), func(row pgx.Row) error { return row.Scan(&typ) },
		`SELECT type FROM actions WHERE id = 'act_1'`))
	require.Equal(t, "approval", typ)

	// Written again by the next append, a doc is updated in place.
	p = appendParams("ses_a", 3, 1)
	p.Docs = []store.DocWrite{doc(store.DocTurn, "turn_1", "done", `{"n":3}`, later)}
	_, err = s.EventAppend(t.Context(), p)
	require.NoError(t, err)
	turn, err = s.TurnGet(t.Context(), "ses_a", "turn_1")
	require.NoError(t, err)
	require.Equal(t, "done", turn.Status)
	require.Equal(t, testTime, turn.CreatedAt)
}

// A doc whose id is another session's refuses the whole append, and the
// error names it; a stale seq is still told as such when the append's
// docs would be refused too.
func TestAppendDocOfAnotherSessionIsNamed(t *testing.T) {
	t.Parallel()
	s := storeWithDocOfA(t, store.DocArtifact, "art_a")

	p := appendParams("ses_b", 1, 1)
	p.Docs = []store.DocWrite{
		{Kind: store.DocTurn, ID: "turn_b", Status: "running", Doc: json.RawMessage(`{}`), CreatedAt: testTime},
		{Kind: store.DocArtifact, ID: "art_a", Status: "final", Doc: json.RawMessage(`{}`), CreatedAt: testTime},
	}
	_, err := s.EventAppend(t.Context(), p)
	require.ErrorIs(t, err, store.ErrConflict)
	require.ErrorContains(t, err, "artifact art_a")
	_, err = s.TurnGet(t.Context(), "ses_b", "turn_b")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing of the refused append was kept")
	row, err := s.SessionGet(context.Background(), "ses_b")
	require.NoError(t, err)
	require.Equal(t, int64(1), row.LastSeq)

	p = appendParams("ses_b", 0, 1) // stale, and its doc is ses_a's
	p.Docs = []store.DocWrite{{Kind: store.DocArtifact, ID: "art_a", Status: "final", Doc: json.RawMessage(`{}`), CreatedAt: testTime}}
	_, err = s.EventAppend(t.Context(), p)
	require.ErrorIs(t, err, store.ErrConflict)
	require.ErrorContains(t, err, "last seq is 1, expected 0")
}

// TestJSONRefusedAsChecksRefuseIt: an append's documents are parsed by the
// server alone (appendChecks), so the server must refuse exactly what the
// store's checks refuse (encoding/json's grammar, valid UTF-8, no NUL),
// with the checks' error naming the field, and store the rest.
func TestJSONRefusedAsChecksRefuseIt(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	createSession(t, s, "ses_j", false)
	docs := []string{
		`0`, `-0`, `01`, `-01`, `1.`, `.5`, `+1`, `1e5`, `1E+2`, `1e`, `-`, `0x10`, `NaN`, `Infinity`,
		`"\u0000"`, `"\ud800"`, `"\u12"`, `"a\x"`, "\"\x7f\"", "\"\t\"", "\"a\x00\"", "1\x00",
		` [1] `, "\r\n\t[1]", "\f1", "1\v", `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `nul`, `true false`, `[`, ` `,
		`{"a":{"b":[true,false,null,"x",1.5e-3]}}`, `{"a":1,"a":2}`,
		"\"\xff\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xef\xbf\xbe\"", "\"é😀\"",
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	}
	seq := int64(1)
	for _, doc := range docs {
		for _, field := range []string{"state", "events[0].data", "docs[0].doc"} {
			p := appendParams("ses_j", seq, 1)
			switch field {
			case "state":
				p.State = json.RawMessage(doc)
			case "events[0].data":
				p.Events[0].Data = json.RawMessage(doc)
			default:
				p.Docs = []store.DocWrite{{Kind: store.DocCheckpoint, ID: fmt.Sprintf("ck_%d", seq), Status: "done",
					Doc: json.RawMessage(doc), CreatedAt: testTime}}
			}
			want := checks.JSON(field, json.RawMessage(doc))
			_, err := s.EventAppend(t.Context(), p)
			if want != nil {
				require.ErrorContains(t, err, want.Error(), "%q as %s", doc, field)
				require.NotErrorIs(t, err, store.ErrConflict)
				continue
			}
			require.NoError(t, err, "%q as %s", doc, field)
			seq++
		}
	}
	row, err := s.SessionGet(t.Context(), "ses_j")
	require.NoError(t, err)
	require.Equal(t, seq, row.LastSeq)
}

// An append's event without data and doc without a document are stored as
// NULL (sent as "", which no JSON document is), read back as nil; the JSON
// string "" is a document.
func TestAppendEmptyDocumentsAreNull(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	createSession(t, s, "ses_n", false)
	p := appendParams("ses_n", 1, 2)
	p.Events[0].Data, p.Events[1].Data = nil, json.RawMessage(`""`)
	p.Docs = []store.DocWrite{
		{Kind: store.DocEffect, ID: "eff_n", Status: "done", CreatedAt: testTime},
		{Kind: store.DocCheckpoint, ID: "ck_n", Status: "done", Doc: json.RawMessage(`""`), CreatedAt: testTime},
	}
	_, err := s.EventAppend(t.Context(), p)
	require.NoError(t, err)
	events, err := s.EventList(t.Context(), "ses_n", 1, 0)
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Nil(t, events[0].Data)
	require.Equal(t, `""`, string(events[1].Data))
	var nulls []bool
	err = s.query(t.Context(), func(rows pgx.Rows) error {
		var null bool
		if err := rows.Scan(&null); err != nil {
			return err
		}
		nulls = append(nulls, null)
		return nil
	}, `SELECT doc IS NULL FROM effects WHERE id = 'eff_n' UNION ALL SELECT doc IS NULL FROM checkpoints WHERE id = 'ck_n'`)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, nulls)
}

// Each table of an append (its events, its docs of a kind) reads its rows
// in a form chosen by their number (formFor): one row sent as its values,
// up to maxSubscriptedRows by subscript from arrays, more unnested. Every
// form stores every column of every row as sent, an event without data
// and a doc without a document as NULL.
func TestAppendFewAndManyRowsStoreAlike(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	kinds := []store.DocKind{store.DocTurn, store.DocAction, store.DocEffect, store.DocArtifact, store.DocCheckpoint}
	for _, tc := range []struct {
		events, docs          int
		subscripted, unnested int // tables read by subscript, unnested
	}{
		{events: 1, docs: 1},
		{events: maxSubscriptedRows, docs: maxSubscriptedRows, subscripted: 6},
		{events: maxSubscriptedRows + 1, docs: 1, unnested: 1},
		{events: 2, docs: maxSubscriptedRows + 1, subscripted: 1, unnested: 5},
	} {
		name := fmt.Sprintf("ses_%d_%d", tc.events, tc.docs)
		createSession(t, s, name, false)
		p := appendParams(name, 1, tc.events)
		for i := range p.Events {
			e := &p.Events[i]
			e.Type, e.Time, e.TurnID, e.Step, e.WorkerID = fmt.Sprintf("type.%d", i), testTime.Add(time.Duration(i)*time.Second),
				fmt.Sprintf("turn_%d", i), i, fmt.Sprintf("w%d", i)
		}
		p.Events[tc.events-1].Data = nil
		for _, kind := range kinds {
			for i := range tc.docs {
				body := json.RawMessage(fmt.Sprintf(`{"type":"t%d","i":%d}`, i, i))
				if i == 1 {
					body = nil
				}
				p.Docs = append(p.Docs, store.DocWrite{Kind: kind, ID: fmt.Sprintf("%s_%s_%d", kind, name, i),
					Status: fmt.Sprintf("s%d", i), Doc: body, CreatedAt: testTime.Add(time.Duration(i) * time.Minute)})
			}
		}

		_, _, build, err := prepareAppend(p)
		require.NoError(t, err)
		queued := &txn{s: s, b: &pgx.Batch{}}
		build(queued)
		sql := queued.b.QueuedQueries[0].SQL
		require.Equal(t, []int{tc.subscripted, tc.unnested},
			[]int{strings.Count(sql, "generate_subscripts("), strings.Count(sql, "unnest(")}, name)
		require.Equal(t, tc.events > 1, strings.Contains(sql, "$13::bigint[]"), "events sent as arrays: %s", name)

		_, err = s.EventAppend(t.Context(), p)
		require.NoError(t, err, name)
		events, err := s.EventList(t.Context(), name, 1, 0)
		require.NoError(t, err)
		require.Len(t, events, tc.events, name)
		for i, e := range events {
			sent := p.Events[i]
			require.Equal(t, []any{int64(i + 2), sent.Type, sent.Time, sent.TurnID, sent.Step, sent.WorkerID},
				[]any{e.Seq, e.Type, e.Time, e.TurnID, e.Step, e.WorkerID}, name)
			if sent.Data == nil {
				require.Nil(t, e.Data, name)
			} else {
				require.JSONEq(t, string(sent.Data), string(e.Data), name)
			}
		}
		for _, d := range p.Docs {
			var (
				status, session string
				doc             []byte
				created         time.Time
			)
			require.NoError(t, s.queryRow(t.Context(), func(row pgx.Row) error { return row.Scan(&session, &status, &doc, &created) },
				`SELECT session_id, status, doc, created_at FROM `+docTables[d.Kind]+` WHERE id = $1`, d.ID), d.ID)
			require.Equal(t, []any{name, d.Status, d.CreatedAt}, []any{session, status, created.UTC()}, d.ID)
			if d.Doc == nil {
				require.Nil(t, doc, d.ID)
			} else {
				require.JSONEq(t, string(d.Doc), string(doc), d.ID)
			}
		}
		var typed int
		require.NoError(t, s.queryRow(t.Context(), func(row pgx.Row) error { return row.Scan(&typed) },
			`SELECT count(*) FROM actions WHERE session_id = $1 AND type = 't' || (doc->>'i')`, name))
		require.Equal(t, tc.docs-min(tc.docs-1, 1), typed, "each action's type is its document's")
	}
}

// The docs' CTEs are checked by one count of all their rows: a doc of
// another session among docs of several kinds, in an append of few rows
// and in one of many, still refuses the whole append.
func TestAppendDocOfAnotherSessionAmongKinds(t *testing.T) {
	t.Parallel()
	s := storeWithDocOfA(t, store.DocEffect, "eff_a")
	for _, n := range []int{1, maxSubscriptedRows + 1} {
		p := appendParams("ses_b", 1, n)
		p.Docs = []store.DocWrite{
			{Kind: store.DocTurn, ID: "turn_b", Status: "running", Doc: json.RawMessage(`{}`), CreatedAt: testTime},
			{Kind: store.DocEffect, ID: "eff_b", Status: "done", Doc: json.RawMessage(`{}`), CreatedAt: testTime},
			{Kind: store.DocEffect, ID: "eff_a", Status: "done", Doc: json.RawMessage(`{}`), CreatedAt: testTime},
			{Kind: store.DocCheckpoint, ID: "ck_b", Status: "done", Doc: json.RawMessage(`{}`), CreatedAt: testTime},
		}
		_, err := s.EventAppend(t.Context(), p)
		require.ErrorIs(t, err, store.ErrConflict, n)
		require.ErrorContains(t, err, "effect eff_a", n)
		for kind, id := range map[store.DocKind]string{store.DocTurn: "turn_b", store.DocEffect: "eff_b", store.DocCheckpoint: "ck_b"} {
			var found int
			require.NoError(t, s.queryRow(t.Context(), func(row pgx.Row) error { return row.Scan(&found) },
				`SELECT count(*) FROM `+docTables[kind]+` WHERE id = $1`, id))
			require.Zero(t, found, "nothing of the refused append was kept: %s", id)
		}
		row, err := s.SessionGet(t.Context(), "ses_b")
		require.NoError(t, err)
		require.Equal(t, int64(1), row.LastSeq)
	}
}

// storeWithDocOfA returns a store with two sessions, ses_a and ses_b, and
// a doc of ses_a's.
func storeWithDocOfA(t *testing.T, kind store.DocKind, id string) *Store {
	t.Helper()
	s := openMigrated(t, nil)
	createSession(t, s, "ses_a", false)
	createSession(t, s, "ses_b", false)
	p := appendParams("ses_a", 1, 1)
	p.Docs = []store.DocWrite{{Kind: kind, ID: id, Status: "final", Doc: json.RawMessage(`{}`), CreatedAt: testTime}}
	_, err := s.EventAppend(t.Context(), p)
	require.NoError(t, err)
	return s
}
