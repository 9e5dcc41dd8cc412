-- 003_secrets: the vault's secrets.
--
-- A row holds a secret's value only as AES-256-GCM ciphertext with its
-- nonce; the key is never in the database (it comes from the environment or
-- a key file), and key_id names which key sealed the row. hosts is a JSON
-- array of host names and inject a JSON object, both written by the vault.

CREATE TABLE secrets (
    name       TEXT    NOT NULL PRIMARY KEY,
    ciphertext BLOB    NOT NULL,
    nonce      BLOB    NOT NULL,
    key_id     TEXT    NOT NULL,
    hosts      TEXT    NOT NULL,
    inject     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
