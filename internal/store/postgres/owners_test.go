package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/storetest"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// preOwnersSQL is what a schema written before 015_blob_owners holds:
// sessions of two projects whose checkpoints name snapshots (one without
// a snapshot), and a snapshot blob nothing names.
const preOwnersSQL = `
INSERT INTO sessions (id, project, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at) VALUES
  ('ses_a', 'alpha', 'agent', 1, 'idle', '{}', '{}', 0, now(), now()),
  ('ses_b', 'beta', 'agent', 1, 'idle', '{}', '{}', 0, now(), now());
INSERT INTO blobs (sha256, size, data) VALUES ('{snapA}', 1, 'a'), ('{snapB}', 1, 'b'), ('{loose}', 1, 'c');
INSERT INTO checkpoints (id, session_id, status, doc, created_at) VALUES
  ('ckpt_a1', 'ses_a', 'ok', '{"id":"ckpt_a1","snapshot":"{snapA}"}', now()),
  ('ckpt_a2', 'ses_a', 'ok', '{"id":"ckpt_a2","snapshot":"{snapA}"}', now()),
  ('ckpt_a3', 'ses_a', 'ok', '{"id":"ckpt_a3","snapshot_error":"too large"}', now()),
  ('ckpt_b1', 'ses_b', 'ok', '{"id":"ckpt_b1","snapshot":"{snapB}"}', now());
`

// TestMigrateBlobOwners: 015_blob_owners records the snapshots already
// journaled as owned by their checkpoints' projects.
func TestMigrateBlobOwners(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	require.Equal(t, "015_blob_owners.sql", ms[14].Name)
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), createMigrationsTable)
	require.NoError(t, err)
	for _, m := range ms[:14] {
		require.NoError(t, s.applyMigration(t.Context(), conn, m))
	}
	_, err = conn.Exec(t.Context(), storetest.PreOwnersSQL(preOwnersSQL))
	require.NoError(t, err)
	conn.Release()
	require.NoError(t, s.Migrate(t.Context()))
	storetest.RequireOwnersMigrated(t, s)
}
