-- 009: a placeholder on branch h-actor only, so that its 011 loads (versions
-- run without gaps). The branch that owns 009 replaces it: delete this file
-- when merging.
SELECT 1;
