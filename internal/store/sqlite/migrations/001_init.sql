-- 001_init: the initial Longhaul schema.
--
-- Conventions (see doc.go): every time is an INTEGER of unix microseconds in
-- UTC; JSON documents are TEXT stored verbatim (NULL when absent); tables are
-- STRICT so a value of the wrong type is an error rather than a silent
-- conversion.

CREATE TABLE agents (
    name       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    spec       TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) STRICT;

CREATE TABLE sessions (
    id               TEXT    NOT NULL PRIMARY KEY,
    agent_name       TEXT    NOT NULL,
    agent_version    INTEGER NOT NULL,
    parent_id        TEXT,
    status           TEXT    NOT NULL,
    spec             TEXT,
    state            TEXT,
    last_seq         INTEGER NOT NULL DEFAULT 0,
    runnable         INTEGER NOT NULL DEFAULT 0,
    wake_at          INTEGER,
    lease_owner      TEXT,
    lease_epoch      INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;

-- Listing: newest first, optionally filtered by one column.
CREATE INDEX sessions_created ON sessions (created_at, id);
CREATE INDEX sessions_status ON sessions (status, created_at, id);
CREATE INDEX sessions_agent ON sessions (agent_name, created_at, id);
CREATE INDEX sessions_parent ON sessions (parent_id, created_at, id) WHERE parent_id IS NOT NULL;

-- Claiming: the two halves of the claimable condition, each over the few rows
-- that can match it, so a claim never scans waiting or finished sessions.
CREATE INDEX sessions_runnable ON sessions (updated_at) WHERE runnable = 1;
CREATE INDEX sessions_wake ON sessions (wake_at) WHERE wake_at IS NOT NULL;
-- The few leased sessions, by owner (a restarting node expires its own).
CREATE INDEX sessions_lease_owner ON sessions (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE events (
    session_id TEXT    NOT NULL REFERENCES sessions (id),
    seq        INTEGER NOT NULL,
    type       TEXT    NOT NULL,
    time       INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL DEFAULT '',
    step       INTEGER NOT NULL DEFAULT 0,
    worker_id  TEXT    NOT NULL DEFAULT '',
    data       TEXT,
    PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE turns (
    id         TEXT    NOT NULL PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id),
    status     TEXT    NOT NULL,
    doc        TEXT,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX turns_session ON turns (session_id, created_at, id);

CREATE TABLE actions (
    id         TEXT    NOT NULL PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id),
    status     TEXT    NOT NULL,
    doc        TEXT,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX actions_session ON actions (session_id, created_at, id);

CREATE TABLE effects (
    id         TEXT    NOT NULL PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id),
    status     TEXT    NOT NULL,
    doc        TEXT,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX effects_session ON effects (session_id, created_at, id);

CREATE TABLE artifacts (
    id         TEXT    NOT NULL PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id),
    status     TEXT    NOT NULL,
    doc        TEXT,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX artifacts_session ON artifacts (session_id, created_at, id);

CREATE TABLE checkpoints (
    id         TEXT    NOT NULL PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id),
    status     TEXT    NOT NULL,
    doc        TEXT,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX checkpoints_session ON checkpoints (session_id, created_at, id);

CREATE TABLE blobs (
    sha256 TEXT    NOT NULL PRIMARY KEY,
    size   INTEGER NOT NULL,
    data   BLOB    NOT NULL
) STRICT;

CREATE TABLE idempotency_keys (
    scope       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    body_sha256 TEXT    NOT NULL,
    status      INTEGER NOT NULL,
    response    BLOB,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
) STRICT;
