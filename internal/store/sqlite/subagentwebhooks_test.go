package sqlite

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// preSubagentWebhookCursorsSQL is a database before 023: a root with a
// webhook_url and its sub-agent in a project without endpoints (never
// scanned: no cursor), and a sub-agent of a project with one (scanned up
// to seq 2 of its 5).
const preSubagentWebhookCursorsSQL = `
INSERT INTO sessions (id, num, project, agent_name, agent_version, parent_id, status, spec, state, last_seq, created_at, updated_at)
VALUES ('ses_root', 1, 'default', 'agent', 1, NULL, 'idle', '{}', '{}', 4, 1, 1),
       ('ses_kid', 2, 'default', 'agent', 1, 'ses_root', 'idle', '{}', '{}', 7, 1, 1),
       ('ses_other', 3, 'other', 'agent', 1, NULL, 'idle', '{}', '{}', 3, 1, 1),
       ('ses_otherkid', 4, 'other', 'agent', 1, 'ses_other', 'idle', '{}', '{}', 5, 1, 1);
INSERT INTO webhook_sessions (session_id, secret, cursor) VALUES ('ses_root', 'whsec_cm9vdA==', 4), ('ses_otherkid', 'whsec_a2lk', 2);
INSERT INTO webhook_endpoints (id, url, secrets, events, created_at, project) VALUES ('wh_1', 'https://example.com/h', '["whsec_ZXA="]', '[]', 1, 'other');
`

// TestSubagentWebhookCursorsMigrated: 023 starts a sub-agent that was never
// scanned at its last event, so its past is not sent to its root's
// webhook_url, and leaves alone a cursor that endpoints still follow and
// the sessions without a parent.
func TestSubagentWebhookCursorsMigrated(t *testing.T) {
	s := openBefore(t, "023_subagent_webhook_cursors.sql", preSubagentWebhookCursorsSQL)
	require.NoError(t, s.Migrate(t.Context()))
	kid, err := s.WebhookSessionInit(t.Context(), "ses_kid", "whsec_bmV3")
	require.NoError(t, err)
	require.Equal(t, int64(7), kid.Cursor, "a sub-agent never scanned starts at its last event")
	require.Regexp(t, `^whsec_[0-9A-F]{48}$`, kid.Secret)
	other, err := s.WebhookSessionInit(t.Context(), "ses_otherkid", "whsec_bmV3")
	require.NoError(t, err)
	require.Equal(t, int64(2), other.Cursor, "a cursor the endpoints follow is kept")
	root, err := s.WebhookSessionInit(t.Context(), "ses_other", "whsec_bmV3")
	require.NoError(t, err)
	require.Zero(t, root.Cursor, "a root is not a sub-agent")
}
