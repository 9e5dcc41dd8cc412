-- 020_pg_append_checks: the server's work per append, cut where no query
-- or guarantee needs it.
--
-- The foreign keys from the journal and projection tables to sessions go.
-- Each inserted row (a step writes about six events, an effect, a
-- checkpoint and its turn) fired a trigger that looked the session up
-- again and locked its row FOR KEY SHARE, a WAL record each time: about a
-- tenth of the server's CPU per step. Every such row is written by an
-- append, in the same transaction as the conditional UPDATE of its
-- session's row that the append's success requires (events.go), or by the
-- session's creation, after the INSERT of that row (sessions.go); a
-- session is never deleted. So the row they referenced exists and is
-- locked by the writer itself, more strongly than the check locked it.
ALTER TABLE events DROP CONSTRAINT events_session_id_fkey;
ALTER TABLE turns DROP CONSTRAINT turns_session_id_fkey;
ALTER TABLE actions DROP CONSTRAINT actions_session_id_fkey;
ALTER TABLE effects DROP CONSTRAINT effects_session_id_fkey;
ALTER TABLE artifacts DROP CONSTRAINT artifacts_session_id_fkey;
ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_session_id_fkey;
ALTER TABLE blob_refs DROP CONSTRAINT blob_refs_session_id_fkey;


-- A session's state is compressed with LZ4 where the server has it
-- (PostgreSQL 14 and later, built with lz4). An append rewrites the row,
-- and once a row passes about 2 kB (a spec and a state of a kilobyte
-- each, as a step's state is) PostgreSQL compresses its largest value at
-- every append: with pglz, the default, a few percent of the server's CPU.
-- Values compressed before keep their method; a server without LZ4 keeps
-- pglz.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE sessions ALTER COLUMN state SET COMPRESSION lz4';
EXCEPTION WHEN syntax_error OR feature_not_supported THEN
    NULL;
END
$$;
