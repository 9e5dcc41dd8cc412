package postgres

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// TestSubagentWebhookCursorsMigrated: 023 starts a sub-agent that was never
// scanned at its last event, so its past is not sent to its root's
// webhook_url, and leaves alone a cursor that endpoints still follow and
// the sessions without a parent (SQLite's test of the same name).
func TestSubagentWebhookCursorsMigrated(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := t.Context()
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	at := slices.IndexFunc(ms, func(m storeutil.Migration) bool { return m.Name == "023_subagent_webhook_cursors.sql" })
	require.Positive(t, at)
	conn, err := s.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release() // a failed step must not hold the pool's close
	_, err = conn.Exec(ctx, createMigrationsTable)
	require.NoError(t, err)
	for _, m := range ms[:at] {
		require.NoError(t, s.applyMigration(ctx, conn, m))
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO sessions (id, project, agent_name, agent_version, parent_id, status, spec, state, last_seq, created_at, updated_at) VALUES
		 ('ses_root', 'default', 'agent', 1, NULL, 'idle', '{}', '{}', 4, $1, $1),
		 ('ses_kid', 'default', 'agent', 1, 'ses_root', 'idle', '{}', '{}', 7, $1, $1),
		 ('ses_other', 'other', 'agent', 1, NULL, 'idle', '{}', '{}', 3, $1, $1),
		 ('ses_otherkid', 'other', 'agent', 1, 'ses_other', 'idle', '{}', '{}', 5, $1, $1)`,
		`INSERT INTO webhook_sessions (session_id, secret, cursor) VALUES ('ses_root', 'whsec_cm9vdA==', 4), ('ses_otherkid', 'whsec_a2lk', 2)`,
		`INSERT INTO webhook_endpoints (id, url, events, secrets, created_at, project) VALUES ('whe_1', 'https://h.example.com/', '{}', '{whsec_ZXA=}', $1, 'other')`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, created)
		}
		_, err := conn.Exec(ctx, q, args...)
		require.NoError(t, err, q)
	}
	require.NoError(t, s.Migrate(ctx))

	kid, err := s.WebhookSessionInit(ctx, "ses_kid", "whsec_bmV3")
	require.NoError(t, err)
	require.Equal(t, int64(7), kid.Cursor, "a sub-agent never scanned starts at its last event")
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, kid.Secret)
	other, err := s.WebhookSessionInit(ctx, "ses_otherkid", "whsec_bmV3")
	require.NoError(t, err)
	require.Equal(t, int64(2), other.Cursor, "a cursor the endpoints follow is kept")
	root, err := s.WebhookSessionInit(ctx, "ses_other", "whsec_bmV3")
	require.NoError(t, err)
	require.Zero(t, root.Cursor, "a root is not a sub-agent")
}
