package sqlite

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// preSubagentWebhookCursorsSQL is a database before 023. Project default:
// a root with a webhook_url, a sub-agent never scanned (no endpoint ever,
// no cursor) and one waiting for a person, its change to requires_action
// at seq 7 of 8. Project other: a sub-agent scanned to seq 2 of 5 for an
// enabled endpoint. Project p: its only endpoint disabled by a 410, a
// sub-agent whose cursor stopped there (2 of 90) and one made after (no
// cursor). Project q: its endpoint deleted after its sub-agent was
// scanned to seq 3 of 80.
const preSubagentWebhookCursorsSQL = `
INSERT INTO sessions (id, num, project, agent_name, agent_version, parent_id, status, spec, state, last_seq, created_at, updated_at)
VALUES ('ses_root', 1, 'default', 'agent', 1, NULL, 'running', '{}', '{}', 4, 1, 1),
       ('ses_kid', 2, 'default', 'agent', 1, 'ses_root', 'idle', '{}', '{}', 7, 1, 1),
       ('ses_stalled', 3, 'default', 'agent', 1, 'ses_root', 'requires_action', '{}', '{}', 8, 1, 1),
       ('ses_other', 4, 'other', 'agent', 1, NULL, 'idle', '{}', '{}', 3, 1, 1),
       ('ses_otherkid', 5, 'other', 'agent', 1, 'ses_other', 'idle', '{}', '{}', 5, 1, 1),
       ('ses_proot', 6, 'p', 'agent', 1, NULL, 'idle', '{}', '{}', 4, 1, 1),
       ('ses_pkid_old', 7, 'p', 'agent', 1, 'ses_proot', 'idle', '{}', '{}', 90, 1, 1),
       ('ses_pkid_new', 8, 'p', 'agent', 1, 'ses_proot', 'idle', '{}', '{}', 70, 1, 1),
       ('ses_qroot', 9, 'q', 'agent', 1, NULL, 'idle', '{}', '{}', 4, 1, 1),
       ('ses_qkid', 10, 'q', 'agent', 1, 'ses_qroot', 'idle', '{}', '{}', 80, 1, 1);
INSERT INTO events (pos, type, time, data) VALUES
  ((3 << 32) + 3, 'session.status_changed', 1, '{"from":"queued","to":"running"}'),
  ((3 << 32) + 7, 'session.status_changed', 2, '{"from":"running","to":"requires_action"}'),
  ((3 << 32) + 8, 'checkpoint.created', 3, '{}'),
  ((4 << 32) + 9, 'session.status_changed', 4, '{"from":"running","to":"idle"}');
INSERT INTO webhook_sessions (session_id, secret, cursor) VALUES
  ('ses_root', 'whsec_cm9vdA==', 4), ('ses_otherkid', 'whsec_a2lk', 2),
  ('ses_pkid_old', 'whsec_a2lk', 2), ('ses_qkid', 'whsec_a2lk', 3);
INSERT INTO webhook_endpoints (id, url, secrets, events, created_at, disabled_at, project) VALUES
  ('wh_1', 'https://example.com/h', '["whsec_ZXA="]', '[]', 1, NULL, 'other'),
  ('wh_2', 'https://example.com/p', '["whsec_ZXA="]', '[]', 1, 2, 'p');
`

// TestSubagentWebhookCursorsMigrated: 023 starts each sub-agent that no
// enabled endpoint followed at its last event, so its past is not sent to
// its root's webhook_url; one waiting for a person just before its change
// to requires_action, so the root's URL hears that the tree waits; and it
// leaves alone a cursor that an enabled endpoint still follows, and the
// sessions without a parent.
func TestSubagentWebhookCursorsMigrated(t *testing.T) {
	s := openBefore(t, "023_subagent_webhook_cursors.sql", preSubagentWebhookCursorsSQL)
	require.NoError(t, s.Migrate(t.Context()))
	for id, want := range map[string]int64{
		"ses_kid":      7,  // never scanned: its last event
		"ses_stalled":  6,  // waiting: before its change to requires_action
		"ses_otherkid": 2,  // an enabled endpoint follows it
		"ses_pkid_old": 90, // its project's endpoint was disabled
		"ses_pkid_new": 70,
		"ses_qkid":     80, // its project's endpoint was deleted
		"ses_other":    0,  // not a sub-agent
	} {
		ws, err := s.WebhookSessionInit(t.Context(), id, "whsec_bmV3")
		require.NoError(t, err)
		require.Equal(t, want, ws.Cursor, id)
	}
	kid, err := s.WebhookSessionInit(t.Context(), "ses_kid", "whsec_bmV3")
	require.NoError(t, err)
	require.Regexp(t, `^whsec_[0-9A-F]{48}$`, kid.Secret)
}
