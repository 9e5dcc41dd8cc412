-- 021_journal_positions: the journal is keyed by its events' positions, an
-- integer made of their session's number and their seq (num << 32 | seq),
-- and every session gets its number.
--
-- The journal was a WITHOUT ROWID table keyed by (session_id, seq). Such a
-- table is an index b-tree, and SQLite splits a full leaf of one by
-- rebalancing it with two siblings and their parent (balance_nonroot), even
-- at its right edge, where a serial session appends: the journal wrote 3.9
-- of the about 14 pages a serial step's commit put in the WAL. A rowid
-- table takes a row past its right edge on a new leaf of its own
-- (balance_quick), its interior pages hold integers, and its rows no longer
-- carry the session's id. A new session takes the next number, so a serial
-- session appends at the right edge; sessions running at once append in
-- their own ranges, as they did in their own keys before.
--
-- A session's events are the positions from num << 32 to num << 32 + 2^32
-- - 1: a seq must stay below 2^32 (insertEvents refuses one that does not).
-- num is assigned at the session's creation as one more than the largest
-- (sessions_num finds it) and never changes; the sessions of a database
-- written before this version are numbered by their rowids.
--
-- The foreign key from the journal to sessions goes, as PostgreSQL's 020
-- dropped it: every event is written by an append whose conditional UPDATE
-- of its session's row must succeed first, or by the session's creation
-- after its row; a session is never deleted.
--
-- The copy reads the sessions in the order of their numbers (CROSS JOIN
-- keeps that order) and each one's events through the old key, so it
-- writes the new table from left to right and sorts nothing larger than a
-- session's journal. It copied 320,000 events (5,000 sessions, 98 MB of
-- journal, 84 MB after) in a second and a half on two cores; the old
-- table's pages are left free in the file for the new rows.
ALTER TABLE sessions ADD COLUMN num INTEGER;
UPDATE sessions SET num = rowid;
CREATE UNIQUE INDEX sessions_num ON sessions (num);

CREATE TABLE events_021 (
    pos       INTEGER NOT NULL PRIMARY KEY,
    type      TEXT    NOT NULL,
    time      INTEGER NOT NULL,
    turn_id   TEXT    NOT NULL DEFAULT '',
    step      INTEGER NOT NULL DEFAULT 0,
    worker_id TEXT    NOT NULL DEFAULT '',
    data      TEXT
) STRICT;
INSERT INTO events_021 (pos, type, time, turn_id, step, worker_id, data)
    SELECT (s.num << 32) + e.seq, e.type, e.time, e.turn_id, e.step, e.worker_id, e.data
    FROM sessions s CROSS JOIN events e ON e.session_id = s.id
    ORDER BY s.num, e.seq;
-- Every event has its session (foreign_keys has always been on, and
-- nothing deletes a session); one that did not, written by hand with the
-- keys off, would not be copied, so the migration stops instead.
CREATE TEMP TABLE events_021_copied (
    missing INTEGER NOT NULL CONSTRAINT "021_journal_positions: some events have no session row; find them with SELECT session_id FROM events WHERE session_id NOT IN (SELECT id FROM sessions)" CHECK (missing = 0)
);
INSERT INTO events_021_copied (missing)
    SELECT (SELECT count(*) FROM events) - (SELECT count(*) FROM events_021);
DROP TABLE events_021_copied;
DROP TABLE events;
ALTER TABLE events_021 RENAME TO events;
