-- 004_webhooks: outgoing webhooks (the webhook package's durable state).
--
-- The journal stays the source of truth: the dispatcher derives each
-- notification from a session's events, records how far it has read in
-- webhook_cursors, and inserts the notifications into webhook_deliveries (the
-- outbox) in the same transaction as the cursor moves. A delivery's id is
-- the webhook-id, derived from (target, session, seq, type), so a re-scan
-- after a crash inserts nothing twice.
--
-- secrets columns hold JSON arrays of "whsec_..." strings (several during a
-- key rotation; the first is the newest).

CREATE TABLE webhook_endpoints (
    id          TEXT    NOT NULL PRIMARY KEY,
    url         TEXT    NOT NULL,
    events      TEXT    NOT NULL,
    secrets     TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    disabled_at INTEGER
) STRICT;

-- One row per session the dispatcher has seen: its signing secret (when it
-- has a webhook_url) and the seq of the last event it turned into
-- notifications.
CREATE TABLE webhook_sessions (
    session_id  TEXT    NOT NULL PRIMARY KEY REFERENCES sessions (id),
    secret      TEXT    NOT NULL,
    cursor      INTEGER NOT NULL DEFAULT 0,
    disabled_at INTEGER
) STRICT;

CREATE TABLE webhook_deliveries (
    pos             INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    endpoint_id     TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    url             TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    event_seq       INTEGER NOT NULL,
    body            BLOB    NOT NULL,
    status          TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

-- The delivery worker's query: pending rows by due time.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';

CREATE TABLE webhook_attempts (
    delivery_id TEXT    NOT NULL REFERENCES webhook_deliveries (id),
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    status_code INTEGER NOT NULL,
    error       TEXT    NOT NULL,
    duration_us INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
) STRICT;
