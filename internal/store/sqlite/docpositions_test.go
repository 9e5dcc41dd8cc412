package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// preDocPositionsSQL is what a database written before 028_doc_positions
// holds: two sessions (numbered 2 and 1) whose effects and checkpoints were
// written in turns, not in the order of their created_at, two of them at
// the same microsecond (their ids decide), and a turn.
const preDocPositionsSQL = `
INSERT INTO sessions (num, id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
VALUES (2, 'ses_b', 'agent', 1, 'idle', '{}', '{}', 0, 1, 1),
       (1, 'ses_a', 'agent', 1, 'idle', '{}', '{}', 0, 2, 2);
INSERT INTO effects (id, session_id, status, doc, created_at) VALUES
  ('eff_b2', 'ses_b', 'succeeded', '{"n":"b2"}', 30),
  ('eff_a9', 'ses_a', 'started',   '{"n":"a9"}', 20),
  ('eff_b1', 'ses_b', 'succeeded', '{"n":"b1"}', 10),
  ('eff_a1', 'ses_a', 'succeeded', '{"n":"a1"}', 20),
  ('eff_a5', 'ses_a', 'in_doubt',  NULL,         5);
INSERT INTO checkpoints (id, session_id, status, doc, created_at) VALUES
  ('ckpt_a2', 'ses_a', '', '{"n":"a2"}', 40),
  ('ckpt_b1', 'ses_b', '', '{"n":"b1"}', 41),
  ('ckpt_a1', 'ses_a', '', '{"n":"a1"}', 39);
INSERT INTO turns (id, session_id, status, doc, created_at) VALUES
  ('turn_a', 'ses_a', 'completed', '{"n":"ta"}', 1);
`

// docIDs returns the ids of rows, in their order.
func docIDs(rows []*store.DocRow) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// rowids returns the rowid of each id of table, in the order of ids.
func rowids(t *testing.T, s *Store, table string, ids ...string) []int64 {
	t.Helper()
	out := make([]int64, len(ids))
	raw(t, s, func(w *writer) error {
		for i, id := range ids {
			if err := w.conn.QueryRowContext(context.Background(), `SELECT rowid FROM `+table+` WHERE id = ?`, id).Scan(&out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return out
}

// TestDocsMigratedToPositions: 028_doc_positions gives each effect and
// checkpoint the place of its session's number and its rank by
// (created_at, id), keeps every field, drops the two tables' indexes by
// session, and lists them as before.
func TestDocsMigratedToPositions(t *testing.T) {
	s := openBefore(t, "028_doc_positions.sql", preDocPositionsSQL)
	require.NoError(t, s.Migrate(t.Context()))
	ctx := t.Context()

	a, err := s.EffectList(ctx, "ses_a")
	require.NoError(t, err)
	require.Equal(t, []string{"eff_a5", "eff_a1", "eff_a9"}, docIDs(a))
	require.Equal(t, "in_doubt", a[0].Status)
	require.Nil(t, a[0].Doc)
	require.JSONEq(t, `{"n":"a9"}`, string(a[2].Doc))
	require.Equal(t, int64(20), a[2].CreatedAt.UnixMicro())
	require.Equal(t, "ses_a", a[2].SessionID)
	b, err := s.EffectList(ctx, "ses_b")
	require.NoError(t, err)
	require.Equal(t, []string{"eff_b1", "eff_b2"}, docIDs(b))
	cps, err := s.CheckpointList(ctx, "ses_a")
	require.NoError(t, err)
	require.Equal(t, []string{"ckpt_a1", "ckpt_a2"}, docIDs(cps))

	require.Equal(t, []int64{1<<32 | 1, 1<<32 | 2, 1<<32 | 3}, rowids(t, s, "effects", "eff_a5", "eff_a1", "eff_a9"))
	require.Equal(t, []int64{2<<32 | 1, 2<<32 | 2}, rowids(t, s, "effects", "eff_b1", "eff_b2"))
	require.Equal(t, []int64{1<<32 | 1, 1<<32 | 2, 2<<32 | 1}, rowids(t, s, "checkpoints", "ckpt_a1", "ckpt_a2", "ckpt_b1"))

	var indexes []string
	raw(t, s, func(w *writer) error {
		rows, err := w.conn.QueryContext(context.Background(),
			`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('effects', 'checkpoints', 'turns') ORDER BY name`)
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			indexes = append(indexes, n)
		}
		return rows.Err()
	})
	require.NotContains(t, indexes, "effects_session")
	require.NotContains(t, indexes, "checkpoints_session")
	require.Contains(t, indexes, "turns_session", "the turns keep theirs")

	// The foreign key to sessions is still there.
	raw(t, s, func(w *writer) error {
		_, err := w.conn.ExecContext(context.Background(),
			`INSERT INTO effects (id, session_id, status, created_at) VALUES ('eff_x', 'ses_none', 'started', 1)`)
		require.ErrorContains(t, err, "FOREIGN KEY")
		return nil
	})
}

// TestDocsTakeTheNextPlaceOfTheirSession: a new effect or checkpoint takes
// the place after the last of its session's, whatever other sessions write
// meanwhile; an update keeps its place; a list sorts by (created_at, id)
// even when a row with an earlier created_at was written later; the
// status filter reads the same range.
func TestDocsTakeTheNextPlaceOfTheirSession(t *testing.T) {
	s := openMigrated(t, nil)
	ctx := t.Context()
	createSession(t, s, "ses_one", false)
	createSession(t, s, "ses_two", false)
	seq := map[string]int64{"ses_one": 1, "ses_two": 1}
	write := func(id string, docs ...store.DocWrite) {
		t.Helper()
		p := appendParams(id, seq[id], 1)
		p.Docs = docs
		_, err := s.EventAppend(ctx, p)
		require.NoError(t, err)
		seq[id]++
	}
	at := func(us int64) time.Time { return time.UnixMicro(us).UTC() }
	effect := func(id, status string, created int64) store.DocWrite {
		return store.DocWrite{Kind: store.DocEffect, ID: id, Status: status, Doc: json.RawMessage(`{"s":"` + status + `"}`), CreatedAt: at(created)}
	}
	write("ses_one", effect("eff_1", "started", 100), store.DocWrite{Kind: store.DocCheckpoint, ID: "ckpt_1", CreatedAt: at(100)})
	write("ses_two", effect("eff_x", "started", 101))
	write("ses_one", effect("eff_2", "started", 90)) // an earlier created_at, written later
	write("ses_one", effect("eff_1", "succeeded", 200))
	write("ses_two", effect("eff_y", "succeeded", 102))

	one, two := storedNum(t, s, "ses_one")<<32, storedNum(t, s, "ses_two")<<32
	require.Equal(t, []int64{one | 1, one | 2}, rowids(t, s, "effects", "eff_1", "eff_2"), "an update keeps its place")
	require.Equal(t, []int64{two | 1, two | 2}, rowids(t, s, "effects", "eff_x", "eff_y"))
	require.Equal(t, []int64{one | 1}, rowids(t, s, "checkpoints", "ckpt_1"))

	list, err := s.EffectList(ctx, "ses_one")
	require.NoError(t, err)
	require.Equal(t, []string{"eff_2", "eff_1"}, docIDs(list), "by created_at, not by place")
	require.Equal(t, "succeeded", list[1].Status)
	require.Equal(t, int64(100), list[1].CreatedAt.UnixMicro(), "the first created_at is kept")
	started, err := s.queryDocs(ctx, store.DocEffect, "ses_one", "started")
	require.NoError(t, err)
	require.Equal(t, []string{"eff_2"}, docIDs(started))
	other, err := s.EffectList(ctx, "ses_two")
	require.NoError(t, err)
	require.Equal(t, []string{"eff_x", "eff_y"}, docIDs(other))

	// An id of another session is refused, and takes no place.
	p := appendParams("ses_two", seq["ses_two"], 1)
	p.Docs = []store.DocWrite{effect("eff_1", "started", 300)}
	_, err = s.EventAppend(ctx, p)
	require.ErrorIs(t, err, store.ErrConflict)
	other, err = s.EffectList(ctx, "ses_two")
	require.NoError(t, err)
	require.Equal(t, []string{"eff_x", "eff_y"}, docIDs(other))
}

// TestDocListsReadTheirSessionsPositions: a session's effects and
// checkpoints are read as a range of their table's rowids, never by a scan
// of the table; the copy of 028 reads each table through its index by
// session and sorts nothing (a sort would hold a session's rows in memory).
func TestDocListsReadTheirSessionsPositions(t *testing.T) {
	s := openMigrated(t, nil)
	for _, kind := range []store.DocKind{store.DocEffect, store.DocCheckpoint} {
		for _, q := range []string{listDocsSQL[kind], listDocsOfStatusSQL[kind]} {
			joined := strings.Join(queryPlan(t, s, q, "ses_x", "started"), "\n")
			require.Contains(t, joined, "SEARCH d USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)", joined)
			require.NotContains(t, joined, "SCAN d", joined)
		}
	}

	s = openBefore(t, "028_doc_positions.sql", preDocPositionsSQL)
	body, err := migrationFS.ReadFile("migrations/028_doc_positions.sql")
	require.NoError(t, err)
	migration := string(body)
	for _, table := range []string{"effects", "checkpoints"} {
		at := strings.Index(migration, "INSERT INTO "+table+"_028 ")
		require.GreaterOrEqual(t, at, 0, "the copy of %s", table)
		end := strings.Index(migration[at:], ";")
		require.Greater(t, end, 0)
		create := strings.LastIndex(migration[:at], "CREATE TABLE "+table+"_028")
		require.GreaterOrEqual(t, create, 0)
		raw(t, s, func(w *writer) error { // the table the copy writes into
			_, err := w.conn.ExecContext(context.Background(), migration[create:at])
			return err
		})
		plan := queryPlan(t, s, migration[at:at+end])
		joined := strings.Join(plan, "\n")
		require.Contains(t, joined, "SCAN d USING INDEX "+table+"_session", "the rows through the old index: %s", joined)
		require.NotContains(t, joined, "TEMP B-TREE", joined)
	}
}

// TestDocMigrationRefusesOrphans: an effect or checkpoint without its
// session's row (possible only by hand, with the foreign keys off) would
// not be copied, so 028_doc_positions stops, says how to find it, and
// leaves the database as it was.
func TestDocMigrationRefusesOrphans(t *testing.T) {
	for _, table := range []string{"effects", "checkpoints"} {
		t.Run(table, func(t *testing.T) {
			s := openBefore(t, "028_doc_positions.sql", preDocPositionsSQL+`
PRAGMA foreign_keys = OFF;
INSERT INTO `+table+` (id, session_id, status, created_at) VALUES ('orphan', 'ses_gone', '', 15);
PRAGMA foreign_keys = ON;`)
			err := s.Migrate(t.Context())
			require.ErrorContains(t, err, "some "+table+" have no session row")
			current, _, err := s.SchemaVersion(t.Context())
			require.NoError(t, err)
			require.Equal(t, 27, current, "the migration was rolled back")
			var n int
			raw(t, s, func(w *writer) error {
				return w.conn.QueryRowContext(context.Background(), `SELECT count(*) FROM `+table).Scan(&n)
			})
			require.Equal(t, map[string]int{"effects": 6, "checkpoints": 4}[table], n, "nothing was lost")

			raw(t, s, func(w *writer) error {
				_, err := w.conn.ExecContext(context.Background(), `DELETE FROM `+table+` WHERE id = 'orphan'`)
				return err
			})
			require.NoError(t, s.Migrate(t.Context()), "once the orphan is gone, the migration runs")
			a, err := s.EffectList(t.Context(), "ses_a")
			require.NoError(t, err)
			require.Len(t, a, 3)
		})
	}
}

// BenchmarkMigrateDocPositions: 028_doc_positions on 5,000 sessions with
// 64 effects and 64 checkpoints each (about 500 bytes of doc a row),
// written session after session in turns, as sessions running at once
// write them; and on one session of 100,000 of each, whose copy sorts
// that session's rows alone. It reports the rows copied a second and the
// process's peak RSS so far (run the long session alone to read its own:
// -bench 'DocPositions/one_long').
func BenchmarkMigrateDocPositions(b *testing.B) {
	for _, c := range []struct {
		name                 string
		sessions, perSession int
	}{
		{"5000_sessions", 5000, 64},
		{"one_long_session", 1, 100_000},
	} {
		b.Run(c.name, func(b *testing.B) {
			docs := fmt.Sprintf(`
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %[1]d)
INSERT INTO sessions (num, id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
SELECT i, printf('ses_%%06d', i), 'agent', 1, 'idle', '{}', '{}', 0, i, i FROM n;
WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %[1]d * %[2]d - 1)
INSERT INTO effects (id, session_id, status, doc, created_at)
SELECT 'eff_' || hex(randomblob(16)), printf('ses_%%06d', i %% %[1]d + 1), 'succeeded',
    '{"result":"' || hex(randomblob(240)) || '"}', i FROM n;
WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %[1]d * %[2]d - 1)
INSERT INTO checkpoints (id, session_id, status, doc, created_at)
SELECT printf('ckpt_%%06d%%012d', i %% %[1]d + 1, i), printf('ses_%%06d', i %% %[1]d + 1), '',
    '{"snapshot":"' || hex(randomblob(240)) || '"}', i FROM n;`, c.sessions, c.perSession)
			benchMigrate(b, "028_doc_positions.sql", docs)
			b.ReportMetric(float64(2*c.sessions*c.perSession*b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
		})
	}
}

// TestDocsAtTheEndOfTheirSessionsRange: a row at the last place of its
// session's range is listed (the range includes it) and can still be
// updated; a new row then finds no place and is refused, writing nothing,
// rather than landing past the range where no list would find it.
func TestDocsAtTheEndOfTheirSessionsRange(t *testing.T) {
	s := openMigrated(t, nil)
	ctx := t.Context()
	createSession(t, s, "ses_full", false)
	createSession(t, s, "ses_next", false)
	num := storedNum(t, s, "ses_full")
	raw(t, s, func(w *writer) error {
		_, err := w.conn.ExecContext(context.Background(),
			`INSERT INTO effects (rowid, id, session_id, status, doc, created_at) VALUES (?, 'eff_last', 'ses_full', 'started', NULL, 1)`,
			num<<seqBits|maxSeq)
		return err
	})
	list, err := s.EffectList(ctx, "ses_full")
	require.NoError(t, err)
	require.Equal(t, []string{"eff_last"}, docIDs(list), "the last place is in the range")

	p := appendParams("ses_full", 1, 1)
	p.Docs = []store.DocWrite{{Kind: store.DocEffect, ID: "eff_last", Status: "succeeded", CreatedAt: time.UnixMicro(2)}}
	_, err = s.EventAppend(ctx, p)
	require.NoError(t, err, "the row at the last place is updated")
	list, err = s.EffectList(ctx, "ses_full")
	require.NoError(t, err)
	require.Equal(t, "succeeded", list[0].Status)

	p = appendParams("ses_full", 2, 1)
	p.Docs = []store.DocWrite{{Kind: store.DocEffect, ID: "eff_beyond", Status: "started", CreatedAt: time.UnixMicro(3)}}
	_, err = s.EventAppend(ctx, p)
	require.Error(t, err, "no place is left")
	row, err := s.SessionGet(ctx, "ses_full")
	require.NoError(t, err)
	require.Equal(t, int64(2), row.LastSeq, "the refused append wrote nothing")
	var beyond int
	raw(t, s, func(w *writer) error {
		return w.conn.QueryRowContext(context.Background(), `SELECT count(*) FROM effects WHERE id = 'eff_beyond'`).Scan(&beyond)
	})
	require.Zero(t, beyond)
	_, err = s.EventAppend(ctx, appendParams("ses_next", 1, 1))
	require.NoError(t, err, "the next session is untouched")
}
