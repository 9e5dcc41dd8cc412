-- 010: a placeholder on branch h-audit only, so that its 012 loads (versions
-- run without gaps). The branch that owns 010 replaces it: delete this file
-- when merging.
SELECT 1;
