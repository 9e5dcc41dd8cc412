package postgres

import (
	"testing"

	"github.com/longhaul-dev/longhaul/internal/store/storetest"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
	"github.com/stretchr/testify/require"
)

// preProjectsSQL is what a schema written before 009_projects holds: a
// session whose journal moved a payload to a blob (its preview holds a
// \u0000 escape, which ->> would fail on), took a person's upload and
// delivered an artifact, each in its own blob, and a blob of a workspace
// snapshot that no session names.
const preProjectsSQL = `
INSERT INTO sessions (id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
VALUES ('ses_old', 'agent', 1, 'idle', '{}', '{}', 3, now(), now());
INSERT INTO blobs (sha256, size, data) VALUES
  ('{payload}', 1, 'a'), ('{upload}', 1, 'b'), ('{artifact}', 1, 'c'), ('{snapshot}', 1, 'd');
INSERT INTO events (session_id, seq, type, time, data) VALUES
  ('ses_old', 1, 'tool.completed', now(), '{"blob":{"sha256":"{payload}","size":1},"preview":"a\u0000"}'),
  ('ses_old', 2, 'workspace.changed', now(), '{"by":"person","op":"write","path":"a","sha256":"{upload}","size":1,"previous_sha256":"{snapshot}"}'),
  ('ses_old', 3, 'artifact.created', now(), '{"artifact":{"id":"art_1"}}');
INSERT INTO artifacts (id, session_id, status, doc, created_at)
VALUES ('art_1', 'ses_old', 'final', '{"id":"art_1","name":"x\u0000","sha256":"{artifact}"}', now());
`

// TestMigrateProjects: 009_projects puts the sessions stored before it in
// the default project and finds the blobs they already refer to.
func TestMigrateProjects(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	require.Equal(t, "009_projects.sql", ms[8].Name)
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), createMigrationsTable)
	require.NoError(t, err)
	for _, m := range ms[:8] {
		require.NoError(t, s.applyMigration(t.Context(), conn, m))
	}
	_, err = conn.Exec(t.Context(), storetest.PreProjectsSQL(preProjectsSQL))
	require.NoError(t, err)
	conn.Release()
	require.NoError(t, s.Migrate(t.Context()))
	storetest.RequireProjectsMigrated(t, s)
}
