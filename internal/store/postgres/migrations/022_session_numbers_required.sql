-- 022_session_numbers_required: nothing changes in PostgreSQL. SQLite's 022
-- refuses a session without the number its journal is keyed by since 021,
-- which PostgreSQL's journal does not use. The version exists so that both
-- drivers' schema versions mean the same thing.
SELECT 1;
