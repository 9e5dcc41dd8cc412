-- 005_webhook_claims: deliveries are claimed before they are sent, so that
-- several dispatchers on one database never send the same delivery at once.
--
-- A claim is (claimed_by, next_attempt_at): claiming a due delivery sets
-- claimed_by to the claimer's node id and moves next_attempt_at to the end
-- of the claim. A claimed delivery is therefore not due, and the due index
-- serves the claim query unchanged; a claim whose owner died mid-attempt
-- simply runs out, and the delivery is due again, with the same id. The
-- attempt recorded under the claim clears claimed_by; only the claimer may
-- record it.
ALTER TABLE webhook_deliveries ADD COLUMN claimed_by TEXT;

-- Who made each attempt (attempts recorded before this migration: '').
ALTER TABLE webhook_attempts ADD COLUMN owner TEXT NOT NULL DEFAULT '';

-- A dispatcher releases its own claims when it stops and when it starts
-- again.
CREATE INDEX webhook_deliveries_claimed ON webhook_deliveries (claimed_by)
    WHERE claimed_by IS NOT NULL AND status = 'pending';
