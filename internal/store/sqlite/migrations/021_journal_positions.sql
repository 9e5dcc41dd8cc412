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
-- keeps that order) and each one's events through the old key, which gives
-- them in seq order, so it writes the new table from left to right and
-- sorts nothing: an ORDER BY that named the seq too would sort each
-- session's journal in a temporary b-tree, in memory (temp_store), 680 MB
-- for a session of 300 MB. It copied 320,000 events (5,000 sessions, 98 MB
-- of journal, 84 MB after) in a second and a half on two cores; the old
-- table's pages are left free in the file for the new rows.
--
-- A seq outside 1 to 2^32 - 1 (none the engine writes; one written by
-- hand) would land in another session's positions, so the migration
-- stops first: the first and last seq of each session are two searches
-- of the old key.
ALTER TABLE sessions ADD COLUMN num INTEGER;
UPDATE sessions SET num = rowid;
CREATE UNIQUE INDEX sessions_num ON sessions (num);

CREATE TEMP TABLE events_021_seqs (
    outside INTEGER NOT NULL CONSTRAINT "021_journal_positions: some sessions have events whose seq is below 1 or above 4294967295; find them with SELECT session_id, seq FROM events WHERE seq < 1 OR seq > 4294967295" CHECK (outside = 0)
);
INSERT INTO events_021_seqs (outside)
    SELECT count(*) FROM sessions s
    WHERE (SELECT min(seq) FROM events WHERE session_id = s.id) < 1
       OR (SELECT max(seq) FROM events WHERE session_id = s.id) > 4294967295;
DROP TABLE events_021_seqs;

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
    ORDER BY s.num;
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
