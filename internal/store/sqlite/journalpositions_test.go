package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// preJournalPositionsSQL is a journal as a database written before
// 021_journal_positions holds it: two sessions whose events were written
// in turns, the second session created first.
const preJournalPositionsSQL = `
INSERT INTO sessions (id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
VALUES ('ses_b', 'agent', 1, 'idle', '{}', '{}', 3, 1, 1),
       ('ses_a', 'agent', 1, 'idle', '{}', '{}', 2, 2, 2);
INSERT INTO events (session_id, seq, type, time, turn_id, step, worker_id, data) VALUES
  ('ses_b', 1, 'session.created', 10, '', 0, '', '{"b":1}'),
  ('ses_a', 1, 'session.created', 11, '', 0, '', '{"a":1}'),
  ('ses_b', 2, 'turn.started', 12, 'turn_b', 0, 'w1', '{"b":2}'),
  ('ses_a', 2, 'turn.started', 13, 'turn_a', 1, 'w2', NULL),
  ('ses_b', 3, 'turn.finished', 14, 'turn_b', 2, 'w1', '{"b":3}');
`

// TestJournalMigratedToPositions: 021_journal_positions moves every event
// to its position, each session's in order with all its fields, and the
// sessions go on: their appends follow their events, and a session created
// afterwards takes a number of its own.
func TestJournalMigratedToPositions(t *testing.T) {
	s := openBefore(t, "021_journal_positions.sql", preJournalPositionsSQL)
	require.NoError(t, s.Migrate(t.Context()))

	b, err := s.EventList(t.Context(), "ses_b", 0, 0)
	require.NoError(t, err)
	require.Len(t, b, 3)
	for i, e := range b {
		require.Equal(t, "ses_b", e.SessionID)
		require.Equal(t, int64(i+1), e.Seq)
		require.JSONEq(t, fmt.Sprintf(`{"b":%d}`, i+1), string(e.Data))
	}
	require.Equal(t, "turn.started", b[1].Type)
	require.Equal(t, "turn_b", b[1].TurnID)
	require.Equal(t, "w1", b[1].WorkerID)
	require.Equal(t, 2, b[2].Step)
	require.Equal(t, int64(14), b[2].Time.UnixMicro())

	a, err := s.EventList(t.Context(), "ses_a", 1, 0)
	require.NoError(t, err)
	require.Len(t, a, 1)
	require.Equal(t, int64(2), a[0].Seq)
	require.Equal(t, "turn_a", a[0].TurnID)
	require.Equal(t, 1, a[0].Step)
	require.Nil(t, a[0].Data)

	_, err = s.EventAppend(t.Context(), appendParams("ses_a", 2, 2))
	require.NoError(t, err)
	createSession(t, s, "ses_c", false)
	_, err = s.EventAppend(t.Context(), appendParams("ses_c", 1, 1))
	require.NoError(t, err)
	for id, want := range map[string]int64{"ses_a": 4, "ses_b": 3, "ses_c": 2} {
		evs, err := s.EventList(t.Context(), id, 0, 0)
		require.NoError(t, err)
		require.Len(t, evs, int(want), id)
		for i, e := range evs {
			require.Equal(t, int64(i+1), e.Seq, id)
			require.Equal(t, id, e.SessionID)
		}
	}
	var nums []int64
	raw(t, s, func(w *writer) error {
		rows, err := w.conn.QueryContext(context.Background(), `SELECT num FROM sessions ORDER BY id`)
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				return err
			}
			nums = append(nums, n)
		}
		return rows.Err()
	})
	require.Len(t, nums, 3)
	require.NotEqual(t, nums[0], nums[1])
	require.Greater(t, nums[2], max(nums[0], nums[1]), "a new session takes the next number")
}

// TestEventListReadsItsSessionsPositions: a session's events are read as
// a range of the journal's rowids, never by a scan of the journal.
func TestEventListReadsItsSessionsPositions(t *testing.T) {
	s := openMigrated(t, nil)
	joined := strings.Join(queryPlan(t, s, listEventsSQL, "ses_x", 0, 100), "\n")
	require.Contains(t, joined, "SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)", joined)
	require.NotContains(t, joined, "SCAN e", joined)
}

// TestSeqBeyondTheSessionsPositions: an append whose seq would leave its
// session's range of positions is refused with a clear error and writes
// nothing; the neighbouring session's events are not touched.
func TestSeqBeyondTheSessionsPositions(t *testing.T) {
	s := openMigrated(t, nil)
	createSession(t, s, "ses_full", false)
	createSession(t, s, "ses_next", false)
	raw(t, s, func(w *writer) error {
		_, err := w.conn.ExecContext(context.Background(), `UPDATE sessions SET last_seq = ? WHERE id = 'ses_full'`, maxSeq-1)
		return err
	})
	_, err := s.EventAppend(t.Context(), appendParams("ses_full", maxSeq-1, 1))
	require.NoError(t, err, "the last seq of the range is written")
	_, err = s.EventAppend(t.Context(), appendParams("ses_full", maxSeq, 1))
	require.ErrorContains(t, err, "holds at most 4294967295 events")
	row, err := s.SessionGet(t.Context(), "ses_full")
	require.NoError(t, err)
	require.Equal(t, int64(maxSeq), row.LastSeq, "the refused append wrote nothing")

	last, err := s.EventList(t.Context(), "ses_full", maxSeq-1, 0)
	require.NoError(t, err)
	require.Len(t, last, 1)
	require.Equal(t, int64(maxSeq), last[0].Seq)
	next, err := s.EventList(t.Context(), "ses_next", 0, 0)
	require.NoError(t, err)
	require.Len(t, next, 1, "the next session's range holds its own events only")
	require.Equal(t, "session.created", next[0].Type)
	beyond, err := s.EventList(t.Context(), "ses_full", 1<<40, 0)
	require.NoError(t, err)
	require.Empty(t, beyond)
}

// TestJournalMigrationRefusesOrphanEvents: an event without its session's
// row (possible only by hand, with the foreign keys off) would not be
// copied, so 021_journal_positions stops, says how to find it, and leaves
// the database as it was.
func TestJournalMigrationRefusesOrphanEvents(t *testing.T) {
	s := openBefore(t, "021_journal_positions.sql", preJournalPositionsSQL+`
PRAGMA foreign_keys = OFF;
INSERT INTO events (session_id, seq, type, time) VALUES ('ses_gone', 1, 'session.created', 15);
PRAGMA foreign_keys = ON;`)
	err := s.Migrate(t.Context())
	require.ErrorContains(t, err, "some events have no session row")
	current, _, err := s.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, 20, current, "the migration was rolled back")
	var events int
	raw(t, s, func(w *writer) error {
		return w.conn.QueryRowContext(context.Background(), `SELECT count(*) FROM events WHERE session_id = 'ses_gone'`).Scan(&events)
	})
	require.Equal(t, 1, events, "nothing was lost")

	raw(t, s, func(w *writer) error {
		_, err := w.conn.ExecContext(context.Background(), `DELETE FROM events WHERE session_id = 'ses_gone'`)
		return err
	})
	require.NoError(t, s.Migrate(t.Context()), "once the orphan is gone, the migration runs")
	b, err := s.EventList(t.Context(), "ses_b", 0, 0)
	require.NoError(t, err)
	require.Len(t, b, 3)
}

// BenchmarkMigrateJournalPositions: 021_journal_positions on a journal of
// 5,000 sessions of 64 events each (about 100 bytes of data an event),
// written session after session in turns, as sessions running at once
// write it; and on one session of 100,000 events of about 2 kB (200 MB),
// whose copy must not hold the session's journal in memory. It reports
// the events copied a second and the process's peak RSS so far (run the
// long session alone to read its own: -bench 'Positions/one_long').
func BenchmarkMigrateJournalPositions(b *testing.B) {
	for _, c := range []struct {
		name                 string
		sessions, perSession int
		hexBytes             int
	}{
		{"5000_sessions", 5000, 64, 40},
		{"one_long_session", 1, 100_000, 1000},
	} {
		b.Run(c.name, func(b *testing.B) {
			journal := fmt.Sprintf(`
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %[1]d)
INSERT INTO sessions (id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
SELECT printf('ses_%%06d', i), 'agent', 1, 'idle', '{}', '{}', %[2]d, i, i FROM n;
WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %[1]d * %[2]d - 1)
INSERT INTO events (session_id, seq, type, time, turn_id, step, worker_id, data)
SELECT printf('ses_%%06d', i %% %[1]d + 1), i / %[1]d + 1, 'tool.completed', i, 'turn_1', i / %[1]d, 'worker',
    '{"output":"' || hex(randomblob(%[3]d)) || '"}' FROM n;`, c.sessions, c.perSession, c.hexBytes)
			benchMigrate(b, "021_journal_positions.sql", journal)
			b.ReportMetric(float64(c.sessions*c.perSession*b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
		})
	}
}

// TestSessionWithoutANumberIsRefused: a session row without the number its
// journal is keyed by cannot be written, by an INSERT
// (022_session_numbers_required) or an UPDATE (029_session_numbers_fixed,
// which refuses any change), and the refusal names the column.
func TestSessionWithoutANumberIsRefused(t *testing.T) {
	s := openMigrated(t, nil)
	createSession(t, s, "ses_a", false)
	for _, q := range []string{
		`INSERT INTO sessions (id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
VALUES ('ses_none', 'agent', 1, 'idle', '{}', '{}', 0, 1, 1)`,
		`UPDATE sessions SET num = NULL WHERE id = 'ses_a'`,
	} {
		err := s.w.do(context.Background(), &request{raw: func(w *writer) error {
			_, err := w.conn.ExecContext(context.Background(), q)
			return err
		}})
		require.Error(t, err, q)
		require.Regexp(t, `sessions\.num (is required|never changes)`, err.Error(), q)
	}
	_, err := s.EventAppend(t.Context(), appendParams("ses_a", 1, 1))
	require.NoError(t, err, "the session kept its number")
}

// TestJournalMigrationRefusesSeqsOutOfRange: a seq that a session's
// positions cannot hold (below 1, or 2^32 and above; only a hand-written
// event has one) would land in another session's range, so 021 stops,
// saying how to find them, and loses nothing.
func TestJournalMigrationRefusesSeqsOutOfRange(t *testing.T) {
	for _, seq := range []int64{0, -1, 1 << 32} {
		t.Run(fmt.Sprint(seq), func(t *testing.T) {
			s := openBefore(t, "021_journal_positions.sql", preJournalPositionsSQL+fmt.Sprintf(
				`INSERT INTO events (session_id, seq, type, time) VALUES ('ses_a', %d, 'tool.completed', 16);`, seq))
			err := s.Migrate(t.Context())
			require.ErrorContains(t, err, "some sessions have events whose seq is below 1 or above 4294967295")
			current, _, err := s.SchemaVersion(t.Context())
			require.NoError(t, err)
			require.Equal(t, 20, current, "the migration was rolled back")

			raw(t, s, func(w *writer) error {
				_, err := w.conn.ExecContext(context.Background(), `DELETE FROM events WHERE session_id = 'ses_a' AND seq = ?`, seq)
				return err
			})
			require.NoError(t, s.Migrate(t.Context()), "once the event is gone, the migration runs")
			a, err := s.EventList(t.Context(), "ses_a", 0, 0)
			require.NoError(t, err)
			require.Len(t, a, 2)
			b, err := s.EventList(t.Context(), "ses_b", 0, 0)
			require.NoError(t, err)
			require.Len(t, b, 3)
		})
	}
}

// TestJournalMigrationCopiesWithoutASort: 021's copy reads the sessions by
// number and each one's events through the old key, already in seq order.
// A plan with a temporary b-tree would sort each session's journal in
// memory (temp_store), as large as the largest session's.
func TestJournalMigrationCopiesWithoutASort(t *testing.T) {
	s := openBefore(t, "021_journal_positions.sql", preJournalPositionsSQL)
	body, err := migrationFS.ReadFile("migrations/021_journal_positions.sql")
	require.NoError(t, err)
	migration := string(body)
	at := strings.Index(migration, "INSERT INTO events_021 ")
	require.GreaterOrEqual(t, at, 0, "the copy's statement")
	end := strings.Index(migration[at:], ";")
	require.Greater(t, end, 0)
	raw(t, s, func(w *writer) error { // the statements before the copy
		_, err := w.conn.ExecContext(context.Background(), migration[:at])
		return err
	})
	plan := queryPlan(t, s, migration[at:at+end])
	require.NotEmpty(t, plan)
	require.Contains(t, strings.Join(plan, "\n"), "USING INDEX sessions_num", "the sessions in the order of their numbers")
	for _, step := range plan {
		require.NotContains(t, step, "TEMP B-TREE", "the plan: %q", plan)
	}
}
