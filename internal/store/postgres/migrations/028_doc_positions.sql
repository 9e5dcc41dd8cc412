-- 028_doc_positions: nothing changes in PostgreSQL. SQLite's 028 finds a
-- session's effects and checkpoints by positions in their tables' rowids
-- and drops the two tables' indexes by session, which every step wrote
-- into. A PostgreSQL table is a heap, with no key to place a row by, so
-- its indexes by session stay. The version exists so that both drivers'
-- schema versions mean the same thing.
SELECT 1;
