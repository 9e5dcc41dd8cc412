-- 013_hot_appends (SQLite dialect of the PostgreSQL driver's 013): the
-- runnable sessions' index is keyed by id, which never changes, instead of
-- updated_at, which every append of a running session changes: an append
-- no longer rewrites an entry of that index. A claim finds the runnable rows
-- through the index's predicate and sorts them by an expression anyway.
DROP INDEX sessions_runnable;
CREATE INDEX sessions_runnable ON sessions (id) WHERE runnable = 1;
