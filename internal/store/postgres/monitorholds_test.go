package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMonitorHoldsMigrated: SQLite's test of the same name, on
// PostgreSQL's 024.
func TestMonitorHoldsMigrated(t *testing.T) {
	t.Parallel()
	s, conn := openBefore(t, "024_monitor_holds.sql")
	ctx := t.Context()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO sessions (id, project, agent_name, agent_version, parent_id, status, spec, state, last_seq, created_at, updated_at, runnable) VALUES
		 ('ses_held', 'default', 'agent', 1, NULL, 'requires_action', '{}', '{}', 9, $1, $1, false),
		 ('ses_kid', 'default', 'agent', 1, 'ses_held', 'running', '{}', '{}', 4, $1, $1, false),
		 ('ses_approval', 'default', 'agent', 1, NULL, 'requires_action', '{}', '{}', 6, $1, $1, false),
		 ('ses_decided', 'default', 'agent', 1, NULL, 'idle', '{}', '{}', 12, $1, $1, false),
		 ('ses_paused', 'default', 'agent', 1, NULL, 'paused', '{}', '{}', 8, $1, $1, false)`,
		`INSERT INTO actions (id, session_id, status, doc, created_at, type) VALUES
		 ('act_1', 'ses_held', 'pending', '{"id":"act_1","type":"monitor","status":"pending"}', $1, 'monitor'),
		 ('act_2', 'ses_approval', 'pending', '{"id":"act_2","type":"approval","status":"pending"}', $1, 'approval'),
		 ('act_3', 'ses_decided', 'resolved', '{"id":"act_3","type":"monitor","status":"resolved"}', $1, 'monitor'),
		 ('act_4', 'ses_paused', 'pending', '{"id":"act_4","type":"monitor","status":"pending"}', $1, 'monitor')`,
	} {
		_, err := conn.Exec(ctx, q, created)
		require.NoError(t, err, q)
	}
	require.NoError(t, s.Migrate(ctx))
	for id, want := range map[string]bool{
		"ses_held": true, "ses_paused": true,
		"ses_kid": false, "ses_approval": false, "ses_decided": false,
	} {
		row, err := s.SessionGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, row.Runnable, id)
	}
}
