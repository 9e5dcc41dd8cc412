-- 002_action_inbox: the inbox of required actions across sessions.
--
-- The inbox lists actions by status (almost always "pending": few rows, so
-- the index keeps the listing cheap however many actions were ever resolved)
-- or by the action document's type, in creation order.
--
-- The type is a column the driver fills from the document's "type" member
-- when it writes the row, not an index on (doc ->> 'type'): ->> decodes every
-- string of the document, and fails on a \u0000 escape anywhere in it, which
-- would make writing such an action fail.

ALTER TABLE actions ADD COLUMN type TEXT COLLATE "C";

CREATE INDEX actions_status ON actions (status, created_at, id);
CREATE INDEX actions_type ON actions (type, created_at, id);
