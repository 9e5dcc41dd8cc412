-- 024_monitor_holds: a session waiting on a monitor action from before
-- this release is claimed once more, so that its sub-agents are paused
-- with it.
--
-- From this release a pending monitor action holds the session's running
-- sub-agents (internal/engine, monitorhold.go): a claim pauses them and
-- journals monitor.held before the session parks on the action, and until
-- then the session stays runnable. A session that parked on a monitor
-- action before the upgrade has no monitor.held and is not runnable:
-- nothing would claim it before its row was next written (the action's
-- decision), and its sub-agents would run on meanwhile. Each such session
-- is made runnable: its claim makes the walk (or journals monitor.held at
-- once, with no sub-agent) and parks it again. One paused by a person
-- parks at its claim and walks once resumed, as any paused session.
UPDATE sessions SET runnable = true
WHERE NOT runnable
  AND EXISTS (SELECT 1 FROM actions AS a
              WHERE a.session_id = sessions.id AND a.status = 'pending'
                AND a.type = 'monitor');
