-- 009: reserved for the sessions' project column (issue 17, developed on
-- another branch). This placeholder only keeps the versions without a gap
-- on this branch; the merge replaces it with the real 009.
SELECT 1;
