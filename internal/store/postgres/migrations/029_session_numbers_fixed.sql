-- 029_session_numbers_fixed: nothing changes in PostgreSQL, whose sessions
-- have no number. SQLite's 029 refuses any change of a session's number,
-- which its journal's positions are made of. The version exists so that
-- both drivers' schema versions mean the same thing.
SELECT 1;
