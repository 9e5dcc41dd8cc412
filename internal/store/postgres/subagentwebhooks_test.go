package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSubagentWebhookCursorsMigrated: SQLite's test of the same name, on
// PostgreSQL's 023.
func TestSubagentWebhookCursorsMigrated(t *testing.T) {
	t.Parallel()
	s, conn := openBefore(t, "023_subagent_webhook_cursors.sql")
	ctx := t.Context()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO sessions (id, project, agent_name, agent_version, parent_id, status, spec, state, last_seq, created_at, updated_at) VALUES
		 ('ses_root', 'default', 'agent', 1, NULL, 'running', '{}', '{}', 4, $1, $1),
		 ('ses_kid', 'default', 'agent', 1, 'ses_root', 'idle', '{}', '{}', 7, $1, $1),
		 ('ses_stalled', 'default', 'agent', 1, 'ses_root', 'requires_action', '{}', '{}', 8, $1, $1),
		 ('ses_other', 'other', 'agent', 1, NULL, 'idle', '{}', '{}', 3, $1, $1),
		 ('ses_otherkid', 'other', 'agent', 1, 'ses_other', 'idle', '{}', '{}', 5, $1, $1),
		 ('ses_proot', 'p', 'agent', 1, NULL, 'idle', '{}', '{}', 4, $1, $1),
		 ('ses_pkid_old', 'p', 'agent', 1, 'ses_proot', 'idle', '{}', '{}', 90, $1, $1),
		 ('ses_pkid_new', 'p', 'agent', 1, 'ses_proot', 'idle', '{}', '{}', 70, $1, $1),
		 ('ses_qroot', 'q', 'agent', 1, NULL, 'idle', '{}', '{}', 4, $1, $1),
		 ('ses_qkid', 'q', 'agent', 1, 'ses_qroot', 'idle', '{}', '{}', 80, $1, $1)`,
		`INSERT INTO events (session_id, seq, type, time, data) VALUES
		 ('ses_stalled', 3, 'session.status_changed', $1, '{"from":"queued","to":"running"}'),
		 ('ses_stalled', 7, 'session.status_changed', $1, '{"from":"running","to":"requires_action"}'),
		 ('ses_stalled', 8, 'checkpoint.created', $1, '{}'),
		 ('ses_other', 9, 'session.status_changed', $1, '{"from":"running","to":"idle"}')`,
		`INSERT INTO webhook_sessions (session_id, secret, cursor) VALUES
		 ('ses_root', 'whsec_cm9vdA==', 4), ('ses_otherkid', 'whsec_a2lk', 2),
		 ('ses_pkid_old', 'whsec_a2lk', 2), ('ses_qkid', 'whsec_a2lk', 3)`,
		`INSERT INTO webhook_endpoints (id, url, events, secrets, created_at, disabled_at, project) VALUES
		 ('whe_1', 'https://h.example.com/', '{}', '{whsec_ZXA=}', $1, NULL, 'other'),
		 ('whe_2', 'https://h.example.com/p', '{}', '{whsec_ZXA=}', $1, $1, 'p')`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, created)
		}
		_, err := conn.Exec(ctx, q, args...)
		require.NoError(t, err, q)
	}
	require.NoError(t, s.Migrate(ctx))

	for id, want := range map[string]int64{
		"ses_kid":      7,  // never scanned: its last event
		"ses_stalled":  6,  // waiting: before its change to requires_action
		"ses_otherkid": 2,  // an enabled endpoint follows it
		"ses_pkid_old": 90, // its project's endpoint was disabled
		"ses_pkid_new": 70,
		"ses_qkid":     80, // its project's endpoint was deleted
		"ses_other":    0,  // not a sub-agent
	} {
		ws, err := s.WebhookSessionInit(ctx, id, "whsec_bmV3")
		require.NoError(t, err)
		require.Equal(t, want, ws.Cursor, id)
	}
	kid, err := s.WebhookSessionInit(ctx, "ses_kid", "whsec_bmV3")
	require.NoError(t, err)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, kid.Secret)
}
