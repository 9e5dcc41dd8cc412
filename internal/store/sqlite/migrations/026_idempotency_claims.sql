-- 026_idempotency_claims: an idempotent request holds its key while it runs.
--
-- Before, a request with an Idempotency-Key recorded its response only after
-- its work had committed. Two nodes given the same request at once both ran
-- it (two sessions, each running its agent), and a node that died between
-- the work's commit and the record left a retry to run it again. A claim
-- is written before the work: another run of the key meets it and is told
-- to retry (409), and a claim whose run died expires and is taken over by
-- the retry, which runs with the claim's seed: a creation named after the
-- seed finds what the first run made (store.IdempotencyClaim).
--
-- A claim names the node that holds it (owner): a node that starts again
-- expires its previous incarnation's claims at once, as its leases, so a
-- retry after its crash need not wait for them to expire.
--
-- Claims live beside the records, not in them: a node of the previous
-- release reads idempotency_keys only and never meets a response-less row.
CREATE TABLE idempotency_claims (
    scope       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    body_sha256 TEXT    NOT NULL,
    seed        TEXT    NOT NULL,
    token       TEXT    NOT NULL,
    owner       TEXT    NOT NULL DEFAULT '',
    expires_at  INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
) STRICT;
