-- 027_idempotency_retention: idempotency records and lapsed claims expire.
--
-- Every POST of the Go client, the CLI and the web UI carries an
-- Idempotency-Key, and its response was kept forever: a table that only
-- grew. A node now deletes, every hour, the records older than its
-- retention and the claims that lapsed before it
-- (store.IdempotencyPrune); these indexes let it find them without reading
-- the whole table.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
CREATE INDEX idempotency_claims_expires_at ON idempotency_claims (expires_at);
