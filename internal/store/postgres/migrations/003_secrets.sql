-- 003_secrets: the vault's secrets.
--
-- A row holds a secret's value only as AES-256-GCM ciphertext with its
-- nonce; the key is never in the database (it comes from the environment or
-- a key file), and key_id names which key sealed the row. hosts lists the
-- host names the secret may be sent to; inject is a JSON object written by
-- the vault (JSONB: the store treats it as a value, never as text to echo).

CREATE TABLE secrets (
    name       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    ciphertext BYTEA            NOT NULL,
    nonce      BYTEA            NOT NULL,
    key_id     TEXT             NOT NULL,
    hosts      TEXT[]           NOT NULL,
    inject     JSONB            NOT NULL,
    created_at TIMESTAMPTZ      NOT NULL,
    updated_at TIMESTAMPTZ      NOT NULL
);
