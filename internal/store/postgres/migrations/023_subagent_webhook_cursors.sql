-- 023_subagent_webhook_cursors: a sub-agent's past notifications are not
-- sent to its root's webhook_url.
--
-- From this release a sub-agent's notifications go to its root's
-- webhook_url (internal/webhook, subagents.go), from its webhook cursor on.
-- Before, a sub-agent of a project without an enabled webhook endpoint
-- was not scanned: it has no cursor, or one left where its project's last
-- endpoint was disabled (a 410) or deleted, and the dispatcher would send
-- its past to the root's URL: the questions and approvals of sub-agents
-- long done. Such a sub-agent starts at its last event, except one waiting
-- for a person now, which starts just before its last status change (the
-- change to requires_action): the root's URL hears that the tree waits.
-- One whose project has an enabled endpoint keeps its cursor: the events
-- after it are still owed to the endpoints, and are few. Its own secret is
-- never used (its notifications are signed with its root's); the column
-- wants one.
INSERT INTO webhook_sessions (session_id, secret, cursor)
SELECT s.id, 'whsec_' || encode(sha256(convert_to(random()::text || clock_timestamp()::text || s.id, 'UTF8')), 'base64'),
       CASE WHEN s.status = 'requires_action' THEN coalesce(
           (SELECT max(e.seq) - 1 FROM events AS e
            WHERE e.session_id = s.id AND e.type = 'session.status_changed'),
           s.last_seq)
       ELSE s.last_seq END
FROM sessions AS s
WHERE s.parent_id IS NOT NULL AND s.parent_id <> ''
  AND NOT EXISTS (SELECT 1 FROM webhook_endpoints AS e WHERE e.project = s.project AND e.disabled_at IS NULL)
ON CONFLICT (session_id) DO UPDATE SET cursor = GREATEST(webhook_sessions.cursor, EXCLUDED.cursor);
