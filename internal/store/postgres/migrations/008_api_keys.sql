-- 008_api_keys: the API keys created through POST /v1/keys (PostgreSQL
-- dialect of the SQLite driver's 008_api_keys).
--
-- A key's token is never stored: token_hash is the lowercase hex SHA-256 of
-- it (a high-entropy token needs no slow password hash), unique so that an
-- authentication is one indexed lookup. prefix keeps the token's first
-- characters to tell keys apart in a list. A revoked key stays (revoked_at
-- set) so that lists and audit entries can still name it; every node reads
-- the row on each request, so a revocation holds at once everywhere.
CREATE TABLE api_keys (
    id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    name         TEXT             NOT NULL,
    role         TEXT             NOT NULL,
    project      TEXT             NOT NULL,
    prefix       TEXT             NOT NULL,
    token_hash   TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at   TIMESTAMPTZ      NOT NULL,
    last_used_at TIMESTAMPTZ,
    expires_at   TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);
