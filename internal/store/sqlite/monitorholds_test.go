package sqlite

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// preMonitorHoldsSQL is a database before 024: a session parked on a
// monitor action (its sub-agent running), one parked on an approval, one
// whose monitor action was decided, and one paused by a person while its
// monitor action waits.
const preMonitorHoldsSQL = `
INSERT INTO sessions (id, num, project, agent_name, agent_version, parent_id, status, spec, state, last_seq, created_at, updated_at, runnable)
VALUES ('ses_held', 1, 'default', 'agent', 1, NULL, 'requires_action', '{}', '{}', 9, 1, 1, 0),
       ('ses_kid', 2, 'default', 'agent', 1, 'ses_held', 'running', '{}', '{}', 4, 1, 1, 0),
       ('ses_approval', 3, 'default', 'agent', 1, NULL, 'requires_action', '{}', '{}', 6, 1, 1, 0),
       ('ses_decided', 4, 'default', 'agent', 1, NULL, 'idle', '{}', '{}', 12, 1, 1, 0),
       ('ses_paused', 5, 'default', 'agent', 1, NULL, 'paused', '{}', '{}', 8, 1, 1, 0);
INSERT INTO actions (id, session_id, status, doc, created_at) VALUES
  ('act_1', 'ses_held', 'pending', '{"id":"act_1","type":"monitor","status":"pending"}', 1),
  ('act_2', 'ses_approval', 'pending', '{"id":"act_2","type":"approval","status":"pending"}', 1),
  ('act_3', 'ses_decided', 'resolved', '{"id":"act_3","type":"monitor","status":"resolved"}', 1),
  ('act_4', 'ses_paused', 'pending', '{"id":"act_4","type":"monitor","status":"pending"}', 1);
`

// TestMonitorHoldsMigrated: 024 makes runnable each session a pending
// monitor action parked before the upgrade, so that a claim pauses its
// sub-agents (monitor.held), and nothing else.
func TestMonitorHoldsMigrated(t *testing.T) {
	s := openBefore(t, "024_monitor_holds.sql", preMonitorHoldsSQL)
	require.NoError(t, s.Migrate(t.Context()))
	for id, want := range map[string]bool{
		"ses_held": true, "ses_paused": true,
		"ses_kid": false, "ses_approval": false, "ses_decided": false,
	} {
		row, err := s.SessionGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, want, row.Runnable, id)
	}
}
