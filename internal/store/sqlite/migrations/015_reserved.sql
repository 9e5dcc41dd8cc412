-- 015_reserved: this number is assigned to a change made beside this one
-- (per-project blob ownership); until it lands, this file holds its place
-- so that versions run without a gap, and changes nothing. It is replaced
-- by that change's own 015 migration.
SELECT 1;
