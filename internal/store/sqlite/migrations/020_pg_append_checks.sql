-- 020_pg_append_checks: nothing changes in SQLite. PostgreSQL's 020 drops
-- the foreign keys from the journal and projection tables to sessions,
-- which cost a lookup and a row lock per inserted row there; SQLite checks
-- its foreign keys against the row the same transaction just wrote, in
-- its page cache, for next to nothing. The version exists so that both
-- drivers' schema versions mean the same thing.
SELECT 1;
