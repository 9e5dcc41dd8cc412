-- 011_agent_created_by: who defined each agent version (the JSON of the
-- actor, {"key_id", "name", "role"}); NULL for versions defined before
-- actors were recorded.
ALTER TABLE agents ADD COLUMN created_by TEXT;
