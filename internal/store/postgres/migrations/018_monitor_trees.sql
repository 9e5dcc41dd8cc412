-- 018_monitor_trees: the trajectory monitor's record of a session tree
-- (PostgreSQL dialect of the SQLite driver's 018_monitor_trees).
--
-- One row per tree (keyed by its root session) holds what the monitor's
-- detectors count across the tree's sessions: refused connections, probes
-- for secrets, and which positions of a vault secret the tree's calls sent
-- toward hosts (positions and session/seq references only, never a byte of
-- a secret). Each session's runner replaces it conditionally on version, so
-- sessions of one tree running at once (on any node) merge their counts one
-- after another.
CREATE TABLE monitor_trees (
    root_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    state   BYTEA            NOT NULL,
    version BIGINT           NOT NULL
);
