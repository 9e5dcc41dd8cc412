-- 002_action_inbox: the inbox of required actions across sessions.
--
-- The inbox lists actions by status (almost always "pending": few rows, so
-- the index keeps the listing cheap however many actions were ever resolved)
-- or by the action document's type, in creation order. The type index is on
-- the exact expression ActionListAll filters with, so SQLite can use it.

CREATE INDEX actions_status ON actions (status, created_at, id);
CREATE INDEX actions_type ON actions (json_extract(doc, '$.type'), created_at, id);
