-- 020_reserved: nothing. The version is kept for a change made at the same
-- time on another branch; whichever lands second renumbers its own.
SELECT 1;
