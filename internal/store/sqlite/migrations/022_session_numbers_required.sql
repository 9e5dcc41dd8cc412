-- 022_session_numbers_required: a session's number may not be missing.
--
-- 021_journal_positions added sessions.num with ALTER TABLE, which cannot
-- add a NOT NULL column without a default (and no default is right: each
-- session's number is its own). A session inserted without one would take
-- appends that fail and a journal that reads as empty, so an INSERT or an
-- UPDATE that leaves it NULL is refused here instead, by name. The
-- driver's own INSERT always gives it (insertSessionSQL, sessions.go).
CREATE TRIGGER sessions_num_required_insert BEFORE INSERT ON sessions
    WHEN NEW.num IS NULL
BEGIN
    SELECT RAISE(ABORT, 'sessions.num is required (021_journal_positions)');
END;
CREATE TRIGGER sessions_num_required_update BEFORE UPDATE OF num ON sessions
    WHEN NEW.num IS NULL
BEGIN
    SELECT RAISE(ABORT, 'sessions.num is required (021_journal_positions)');
END;
