-- 009_projects: every session belongs to a project, and a blob is visible
-- through the sessions that refer to it (PostgreSQL dialect of the SQLite
-- driver's 009_projects).
--
-- Sessions stored before projects existed are in the default project (the
-- column's default). sessions_project serves the lists of one project
-- (sessions, reports) newest first, as sessions_created serves them all;
-- the inbox of a project joins actions to their session.
ALTER TABLE sessions ADD COLUMN project TEXT COLLATE "C" NOT NULL DEFAULT 'default';
CREATE INDEX sessions_project ON sessions (project, created_at, id);

-- blob_refs records which session wrote a blob (an event payload moved to a
-- blob, an artifact's content, a person's upload): blobs are shared by
-- content, so whether a key may read one is whether a session of its
-- project refers to it. Snapshot blobs are written without a session: they
-- are read through the workspace's file routes, never by digest.
CREATE TABLE blob_refs (
    sha256     TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id),
    PRIMARY KEY (sha256, session_id)
);

-- What existing sessions already refer to: events moved to a blob, person
-- uploads (workspace.changed) and artifacts. The digests are read from the
-- documents' text, not with ->>, which fails on a \u0000 escape anywhere in
-- a document (see 002_action_inbox). One pass over the journal, once.
INSERT INTO blob_refs (sha256, session_id)
SELECT DISTINCT d.sha256, d.session_id FROM (
    SELECT substring(data::text FROM '^\{"blob":\{"sha256":"([0-9a-f]{64})"') AS sha256, session_id FROM events
    WHERE data::text LIKE '{"blob":%'
    UNION
    SELECT substring(data::text FROM '"sha256":"([0-9a-f]{64})"'), session_id FROM events
    WHERE type = 'workspace.changed'
    UNION
    SELECT substring(doc::text FROM '"sha256":"([0-9a-f]{64})"'), session_id FROM artifacts
) d WHERE d.sha256 IS NOT NULL
ON CONFLICT DO NOTHING;
