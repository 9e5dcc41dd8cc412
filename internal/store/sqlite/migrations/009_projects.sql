-- 009_projects: every session belongs to a project, and a blob is visible
-- through the sessions that refer to it.
--
-- Sessions stored before projects existed are in the default project (the
-- column's default). sessions_project serves the lists of one project
-- (sessions, reports) newest first, as sessions_created serves them all;
-- the inbox of a project joins actions to their session.
ALTER TABLE sessions ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
CREATE INDEX sessions_project ON sessions (project, created_at, id);

-- blob_refs records which session wrote a blob (an event payload moved to a
-- blob, an artifact's content, a person's upload): blobs are shared by
-- content, so whether a key may read one is whether a session of its
-- project refers to it. Snapshot blobs are written without a session: they
-- are read through the workspace's file routes, never by digest.
CREATE TABLE blob_refs (
    sha256     TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    PRIMARY KEY (sha256, session_id)
) STRICT, WITHOUT ROWID;

-- What existing sessions already refer to: events moved to a blob, person
-- uploads (workspace.changed) and artifacts. One pass over the journal,
-- once.
INSERT OR IGNORE INTO blob_refs (sha256, session_id)
SELECT json_extract(data, '$.blob.sha256'), session_id FROM events
WHERE data LIKE '{"blob":%' AND json_valid(data) AND json_extract(data, '$.blob.sha256') IS NOT NULL;
INSERT OR IGNORE INTO blob_refs (sha256, session_id)
SELECT json_extract(data, '$.sha256'), session_id FROM events
WHERE type = 'workspace.changed' AND json_valid(data) AND json_extract(data, '$.sha256') IS NOT NULL;
INSERT OR IGNORE INTO blob_refs (sha256, session_id)
SELECT json_extract(doc, '$.sha256'), session_id FROM artifacts
WHERE json_valid(doc) AND json_extract(doc, '$.sha256') IS NOT NULL;
