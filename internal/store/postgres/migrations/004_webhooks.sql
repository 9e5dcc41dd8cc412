-- 004_webhooks: outgoing webhooks (the webhook package's durable state).
--
-- The journal stays the source of truth: the dispatcher derives each
-- notification from a session's events, records how far it has read in
-- webhook_sessions.cursor, and inserts the notifications into
-- webhook_deliveries (the outbox) in the same transaction as the cursor
-- moves. A delivery's id is the webhook-id, derived from (target, session,
-- seq, type), so a re-scan after a crash inserts nothing twice.
--
-- secrets columns hold "whsec_..." strings (several during a key rotation;
-- the first is the newest).

CREATE TABLE webhook_endpoints (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    url         TEXT             NOT NULL,
    events      TEXT[]           NOT NULL,
    secrets     TEXT[]           NOT NULL,
    created_at  TIMESTAMPTZ      NOT NULL,
    disabled_at TIMESTAMPTZ
);

-- One row per session the dispatcher has seen: its signing secret (when it
-- has a webhook_url) and the seq of the last event it turned into
-- notifications.
CREATE TABLE webhook_sessions (
    session_id  TEXT COLLATE "C" NOT NULL PRIMARY KEY REFERENCES sessions (id),
    secret      TEXT             NOT NULL,
    cursor      BIGINT           NOT NULL DEFAULT 0,
    disabled_at TIMESTAMPTZ
);

CREATE TABLE webhook_deliveries (
    -- pos orders deliveries for listing (newest first); an identity, so it
    -- only grows.
    pos             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              TEXT COLLATE "C" NOT NULL UNIQUE,
    endpoint_id     TEXT COLLATE "C" NOT NULL,
    session_id      TEXT COLLATE "C" NOT NULL,
    url             TEXT             NOT NULL,
    type            TEXT             NOT NULL,
    event_seq       BIGINT           NOT NULL,
    body            BYTEA            NOT NULL,
    status          TEXT COLLATE "C" NOT NULL,
    attempts        BIGINT           NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ,
    created_at      TIMESTAMPTZ      NOT NULL,
    updated_at      TIMESTAMPTZ      NOT NULL
);

-- The delivery worker's query: pending rows by due time.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, pos) WHERE status = 'pending';

CREATE TABLE webhook_attempts (
    delivery_id TEXT COLLATE "C" NOT NULL REFERENCES webhook_deliveries (id),
    attempt     BIGINT           NOT NULL,
    at          TIMESTAMPTZ      NOT NULL,
    status_code BIGINT           NOT NULL,
    error       TEXT             NOT NULL,
    duration_us BIGINT           NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);
