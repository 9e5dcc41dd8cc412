package sqlite

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/storetest"
)

// preOwnersSQL is what a database written before 015_blob_owners holds:
// sessions of two projects whose checkpoints name snapshots (one without
// a snapshot, one whose doc is damaged), and a snapshot blob nothing
// names.
const preOwnersSQL = `
INSERT INTO sessions (id, project, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at) VALUES
  ('ses_a', 'alpha', 'agent', 1, 'idle', '{}', '{}', 0, 1, 1),
  ('ses_b', 'beta', 'agent', 1, 'idle', '{}', '{}', 0, 1, 1);
INSERT INTO blobs (sha256, size, data) VALUES ('{snapA}', 1, x'61'), ('{snapB}', 1, x'62'), ('{loose}', 1, x'63');
INSERT INTO checkpoints (id, session_id, status, doc, created_at) VALUES
  ('ckpt_a1', 'ses_a', 'ok', '{"id":"ckpt_a1","snapshot":"{snapA}"}', 1),
  ('ckpt_a2', 'ses_a', 'ok', '{"id":"ckpt_a2","snapshot":"{snapA}"}', 2),
  ('ckpt_a3', 'ses_a', 'ok', '{"id":"ckpt_a3","snapshot_error":"too large"}', 3),
  ('ckpt_b1', 'ses_b', 'ok', '{"id":"ckpt_b1","snapshot":"{snapB}"}', 1),
  ('ckpt_b2', 'ses_b', 'ok', 'not json', 2);
`

// TestMigrateBlobOwners: 015_blob_owners records the snapshots already
// journaled as owned by their checkpoints' projects.
func TestMigrateBlobOwners(t *testing.T) {
	s := openBefore(t, "015_blob_owners.sql", storetest.PreOwnersSQL(preOwnersSQL))
	require.NoError(t, s.Migrate(t.Context()))
	storetest.RequireOwnersMigrated(t, s)
}
