-- 023_subagent_webhook_cursors: a sub-agent's past notifications are not
-- sent to its root's webhook_url.
--
-- From this release a sub-agent's notifications go to its root's
-- webhook_url (internal/webhook, subagents.go), from its webhook cursor on.
-- A sub-agent of a project without webhook endpoints was never scanned
-- before, so it has no cursor, and the dispatcher would send its whole
-- journal's notifications to the root's URL: the questions and approvals
-- of sub-agents long done. Such a sub-agent starts at its last event. One
-- that has a cursor (its project has endpoints) keeps it: the events after
-- it are still owed to the endpoints, and are few. Its own secret is never
-- used (its notifications are signed with its root's); the column wants
-- one.
INSERT INTO webhook_sessions (session_id, secret, cursor)
SELECT s.id, 'whsec_' || encode(sha256(convert_to(random()::text || clock_timestamp()::text || s.id, 'UTF8')), 'base64'), s.last_seq
FROM sessions AS s
WHERE s.parent_id IS NOT NULL AND s.parent_id <> ''
  AND NOT EXISTS (SELECT 1 FROM webhook_endpoints AS e WHERE e.project = s.project)
ON CONFLICT (session_id) DO NOTHING;
