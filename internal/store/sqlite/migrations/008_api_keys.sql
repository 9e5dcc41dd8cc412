-- 008_api_keys: the API keys created through POST /v1/keys.
--
-- A key's token is never stored: token_hash is the lowercase hex SHA-256 of
-- it (a high-entropy token needs no slow password hash), unique so that an
-- authentication is one indexed lookup. prefix keeps the token's first
-- characters to tell keys apart in a list. A revoked key stays (revoked_at
-- set) so that lists and audit entries can still name it. Times are unix
-- microseconds; last_used_at, expires_at and revoked_at are NULL when unset.
CREATE TABLE api_keys (
    id           TEXT    NOT NULL PRIMARY KEY,
    name         TEXT    NOT NULL,
    role         TEXT    NOT NULL,
    project      TEXT    NOT NULL,
    prefix       TEXT    NOT NULL,
    token_hash   TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    expires_at   INTEGER,
    revoked_at   INTEGER
) STRICT;
