-- 021_pg_append_checks: the server's work per append, cut where no query
-- or guarantee needs it: the foreign keys from the journal and projection tables to sessions go.
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

