-- 028_doc_positions: a session's effects and checkpoints are found by
-- their positions, as its events are (021_journal_positions), and the two
-- tables lose their index on (session_id, created_at, id).
--
-- Every step inserts an effect and a checkpoint. Each such row went into
-- three b-trees: the table, the index of its id (the primary key) and the
-- index by session. The last was there only to list a session's rows; a
-- rowid made of the session's number and the row's place among the
-- session's rows (num << 32 | k, k from 1) lists them as a range of the
-- table. A serial step's commit now writes 8.8 pages to the WAL instead of
-- 10.5, and bench/compare's serial run on SQLite went from 2,553 to 2,729
-- agent-steps/s (medians of four interleaved runs each). Turns,
-- actions and artifacts keep theirs: a step updates its turn in place,
-- which leaves that index alone, and raises no action or artifact.
--
-- A new row takes the next place in its session's range (docs.go); a place
-- is never taken twice and stays the row's when it is updated. A session
-- writes fewer such rows than events (each with the event that creates it),
-- so its range, four billion places, is never full. A list still sorts by
-- (created_at, id), as before; the range is a session's rows only.
--
-- Every row has its session (foreign_keys has always been on, and nothing
-- deletes a session); one that did not, written by hand with the keys off,
-- would have no place, so the migration stops first.
--
-- The copy reads each table through its index by session, in the order of
-- (session_id, created_at, id): row_number() counts each session's rows in
-- that order with no sort, so no session's rows are ever held in memory
-- (temp_store). The sessions come in the order of their ids, which is that
-- of their numbers for the ids the engine makes (ULIDs); those of other
-- shapes (a sub-agent's hash) put their rows in the middle of the new table.
--
-- Both copies come before the old tables are dropped: a copy into the
-- pages a drop freed in the same transaction kept their old content in
-- the statement journal, in memory, as large as the table (534 MiB of peak
-- RSS against 136 MiB, BenchmarkMigrateDocPositions).
CREATE TEMP TABLE doc_positions_028_orphans (
    effects     INTEGER NOT NULL CONSTRAINT "028_doc_positions: some effects have no session row; find them with SELECT id, session_id FROM effects WHERE session_id NOT IN (SELECT id FROM sessions)" CHECK (effects = 0),
    checkpoints INTEGER NOT NULL CONSTRAINT "028_doc_positions: some checkpoints have no session row; find them with SELECT id, session_id FROM checkpoints WHERE session_id NOT IN (SELECT id FROM sessions)" CHECK (checkpoints = 0)
);
INSERT INTO doc_positions_028_orphans (effects, checkpoints)
    SELECT (SELECT count(*) FROM effects WHERE session_id NOT IN (SELECT id FROM sessions)),
           (SELECT count(*) FROM checkpoints WHERE session_id NOT IN (SELECT id FROM sessions));
DROP TABLE doc_positions_028_orphans;

CREATE TABLE effects_028 (
    id         TEXT    NOT NULL PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id),
    status     TEXT    NOT NULL,
    doc        TEXT,
    created_at INTEGER NOT NULL
) STRICT;
INSERT INTO effects_028 (rowid, id, session_id, status, doc, created_at)
    SELECT ((SELECT num FROM sessions WHERE id = d.session_id) << 32)
               + row_number() OVER (PARTITION BY d.session_id ORDER BY d.created_at, d.id),
           d.id, d.session_id, d.status, d.doc, d.created_at
    FROM effects d;

CREATE TABLE checkpoints_028 (
    id         TEXT    NOT NULL PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id),
    status     TEXT    NOT NULL,
    doc        TEXT,
    created_at INTEGER NOT NULL
) STRICT;
INSERT INTO checkpoints_028 (rowid, id, session_id, status, doc, created_at)
    SELECT ((SELECT num FROM sessions WHERE id = d.session_id) << 32)
               + row_number() OVER (PARTITION BY d.session_id ORDER BY d.created_at, d.id),
           d.id, d.session_id, d.status, d.doc, d.created_at
    FROM checkpoints d;

DROP TABLE effects;
DROP TABLE checkpoints;
ALTER TABLE effects_028 RENAME TO effects;
ALTER TABLE checkpoints_028 RENAME TO checkpoints;
