-- 019_session_specs: nothing changes in PostgreSQL. The SQLite driver's
-- 019 moves a session's spec out of its row, which every append rewrites
-- whole there. Here a row larger than about 2 kB has its large values
-- compressed and, if still too large, moved out of line (TOAST), and an
-- update that does not set such a column keeps its pointer and writes none
-- of it again; and the WAL record of an update that stays on its page (a
-- heap-only update, as an append's is) leaves out the prefix and suffix
-- the old and the new version share. The version exists so that both
-- drivers' schema versions mean the same thing.
SELECT 1;
