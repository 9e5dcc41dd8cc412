-- 019_session_specs: a large spec moves out of its session's row, into a
-- table of its own.
--
-- Every append rewrites its session's row (its state, last seq, update
-- time), and SQLite writes a row whole: the spec, which never changes after
-- the session's creation, is copied again at every commit. A small spec
-- costs nothing more (the row's page is written anyway); but with a spec of
-- a few kilobytes (an agent's instructions, its tools) the row no longer
-- fits its leaf and spills into overflow pages, and as the state's length
-- changes at most appends, SQLite freed the row's overflow chain and
-- allocated a new one each time: each of those pages, the freelist's and
-- the database header's went into the WAL of every commit.
--
-- A spec of more than 2,048 bytes (specInlineMax, sessions.go) is written
-- once in session_specs, and the session's row holds NULL instead; a
-- smaller one stays in the row, where a read finds it without another
-- lookup. The table has no rowid: it is read by its key alone.
CREATE TABLE session_specs (
    id   TEXT NOT NULL PRIMARY KEY REFERENCES sessions (id),
    spec TEXT NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO session_specs (id, spec)
    SELECT id, spec FROM sessions WHERE length(CAST(spec AS BLOB)) > 2048;
UPDATE sessions SET spec = NULL WHERE length(CAST(spec AS BLOB)) > 2048;
