-- 029_session_numbers_fixed: a session's number never changes once its row
-- is written.
--
-- Its journal's positions (021_journal_positions) and its effects' and
-- checkpoints' (028_doc_positions) are made of it, so a new number would
-- leave them in another session's range; and the writer keeps the numbers
-- of the sessions it appends to (sessionNums, sessionnums.go) rather than
-- have every append's UPDATE return it. 022's trigger refused only a NULL;
-- this one refuses any change, by name. No statement of the driver sets
-- the column after the session's INSERT, so no append runs the trigger.
DROP TRIGGER sessions_num_required_update;
CREATE TRIGGER sessions_num_fixed BEFORE UPDATE OF num ON sessions
    WHEN NEW.num IS NOT OLD.num
BEGIN
    SELECT RAISE(ABORT, 'sessions.num never changes once written (021_journal_positions, 029_session_numbers_fixed)');
END;
