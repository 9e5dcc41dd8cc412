-- 001_init: the initial Longhaul schema (PostgreSQL dialect of the SQLite
-- driver's 001_init).
--
-- Conventions (see doc.go):
--   * times are TIMESTAMPTZ (microsecond precision, read back in UTC);
--   * seqs, epochs and counters are BIGINT;
--   * documents the engine writes (specs, state, event data, projection
--     docs) are JSON, not JSONB: JSON keeps the text exactly as written (key
--     order, spacing, number spelling), so both drivers return the same
--     bytes, and it accepts the escape \u0000, which JSONB refuses (a tool
--     output holding a NUL byte must not make an append fail);
--   * identifiers and names are TEXT COLLATE "C", so that ORDER BY id is the
--     byte order SQLite uses (and Go's string order), whatever the
--     database's locale.

CREATE TABLE agents (
    name       TEXT COLLATE "C" NOT NULL,
    version    BIGINT           NOT NULL,
    spec       JSON,
    created_at TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE sessions (
    id               TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    agent_name       TEXT COLLATE "C" NOT NULL,
    agent_version    BIGINT           NOT NULL,
    parent_id        TEXT COLLATE "C",
    status           TEXT COLLATE "C" NOT NULL,
    spec             JSON,
    state            JSON,
    last_seq         BIGINT           NOT NULL DEFAULT 0,
    runnable         BOOLEAN          NOT NULL DEFAULT false,
    wake_at          TIMESTAMPTZ,
    lease_owner      TEXT COLLATE "C",
    lease_epoch      BIGINT           NOT NULL DEFAULT 0,
    lease_expires_at TIMESTAMPTZ,
    created_at       TIMESTAMPTZ      NOT NULL,
    updated_at       TIMESTAMPTZ      NOT NULL,
    -- The database clock when the journal last grew (the caller's times are
    -- the caller's). A node whose LISTEN connection dropped re-announces the
    -- sessions that grew meanwhile, found with this column.
    appended_at      TIMESTAMPTZ      NOT NULL DEFAULT clock_timestamp()
);

-- Listing: newest first, optionally filtered by one column.
CREATE INDEX sessions_created ON sessions (created_at, id);
CREATE INDEX sessions_status ON sessions (status, created_at, id);
CREATE INDEX sessions_agent ON sessions (agent_name, created_at, id);
CREATE INDEX sessions_parent ON sessions (parent_id, created_at, id) WHERE parent_id IS NOT NULL;

-- Claiming: the two halves of the claimable condition, each over the few rows
-- that can match it, so a claim never scans waiting or finished sessions.
CREATE INDEX sessions_runnable ON sessions (updated_at) WHERE runnable;
CREATE INDEX sessions_wake ON sessions (wake_at) WHERE wake_at IS NOT NULL;
-- The few leased sessions, by owner (a restarting node expires its own).
CREATE INDEX sessions_lease_owner ON sessions (lease_owner) WHERE lease_owner IS NOT NULL;
-- Re-announcing the sessions that grew while a listener was away.
CREATE INDEX sessions_appended ON sessions (appended_at);

CREATE TABLE events (
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id),
    seq        BIGINT           NOT NULL,
    type       TEXT             NOT NULL,
    time       TIMESTAMPTZ      NOT NULL,
    turn_id    TEXT             NOT NULL DEFAULT '',
    step       BIGINT           NOT NULL DEFAULT 0,
    worker_id  TEXT             NOT NULL DEFAULT '',
    data       JSON,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE turns (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id),
    status     TEXT COLLATE "C" NOT NULL,
    doc        JSON,
    created_at TIMESTAMPTZ      NOT NULL
);
CREATE INDEX turns_session ON turns (session_id, created_at, id);

CREATE TABLE actions (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id),
    status     TEXT COLLATE "C" NOT NULL,
    doc        JSON,
    created_at TIMESTAMPTZ      NOT NULL
);
CREATE INDEX actions_session ON actions (session_id, created_at, id);

CREATE TABLE effects (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id),
    status     TEXT COLLATE "C" NOT NULL,
    doc        JSON,
    created_at TIMESTAMPTZ      NOT NULL
);
CREATE INDEX effects_session ON effects (session_id, created_at, id);

CREATE TABLE artifacts (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id),
    status     TEXT COLLATE "C" NOT NULL,
    doc        JSON,
    created_at TIMESTAMPTZ      NOT NULL
);
CREATE INDEX artifacts_session ON artifacts (session_id, created_at, id);

CREATE TABLE checkpoints (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id),
    status     TEXT COLLATE "C" NOT NULL,
    doc        JSON,
    created_at TIMESTAMPTZ      NOT NULL
);
CREATE INDEX checkpoints_session ON checkpoints (session_id, created_at, id);

CREATE TABLE blobs (
    sha256 TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    size   BIGINT           NOT NULL,
    data   BYTEA            NOT NULL
);

CREATE TABLE idempotency_keys (
    scope       TEXT COLLATE "C" NOT NULL,
    key         TEXT COLLATE "C" NOT NULL,
    body_sha256 TEXT             NOT NULL,
    status      INTEGER          NOT NULL,
    response    BYTEA,
    created_at  TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (scope, key)
);
