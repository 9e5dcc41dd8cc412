-- 021_journal_positions: nothing changes in PostgreSQL. SQLite's 021 keys
-- its journal by an integer position, because its journal was a table
-- without rowids, whose leaves SQLite splits by rebalancing three of them,
-- even at the right edge where a session appends. PostgreSQL's journal is
-- a heap with a b-tree on (session_id, seq) beside it, which splits a full
-- leaf in two. The version exists so that both drivers' schema versions
-- mean the same thing.
SELECT 1;
