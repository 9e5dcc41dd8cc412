-- 013_hot_appends: an append rewrites its session's row. PostgreSQL can
-- make that a heap-only (HOT) update, which writes no index entry and
-- prunes the old version in place, only if no indexed column changes and
-- the row's page has room for the new version. Before, every append changed
-- two indexed columns (appended_at; updated_at, the key of sessions_runnable
-- while the session runs), so it wrote an entry in every index of the table
-- and left them all to vacuum.
-- - sessions_runnable is keyed by id: a claim finds the runnable rows
--   through its predicate and sorts them by an expression anyway.
-- - appended_at moves at most once a second (the append's SQL, events.go;
--   the listener's catch-up reaches back that much further).
-- - Pages are filled to 80 %, leaving room for the new versions.
DROP INDEX sessions_runnable;
CREATE INDEX sessions_runnable ON sessions (id) WHERE runnable;
ALTER TABLE sessions SET (fillfactor = 80);
