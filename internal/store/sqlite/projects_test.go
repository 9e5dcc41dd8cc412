package sqlite

import (
	"testing"

	"github.com/longhaul-dev/longhaul/internal/store/storetest"
	"github.com/stretchr/testify/require"
)

// preProjectsSQL is what a database written before 009_projects holds: a
// session whose journal moved a payload to a blob, took a person's upload
// and delivered an artifact, each in its own blob, and a blob of a
// workspace snapshot that no session names.
const preProjectsSQL = `
INSERT INTO sessions (id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
VALUES ('ses_old', 'agent', 1, 'idle', '{}', '{}', 3, 1, 1);
INSERT INTO blobs (sha256, size, data) VALUES
  ('{payload}', 1, x'61'), ('{upload}', 1, x'62'), ('{artifact}', 1, x'63'), ('{snapshot}', 1, x'64');
INSERT INTO events (session_id, seq, type, time, data) VALUES
  ('ses_old', 1, 'tool.completed', 1, '{"blob":{"sha256":"{payload}","size":1},"preview":"a\u0000"}'),
  ('ses_old', 2, 'workspace.changed', 1, '{"by":"person","op":"write","path":"a","sha256":"{upload}","size":1,"previous_sha256":"{snapshot}"}'),
  ('ses_old', 3, 'artifact.created', 1, '{"artifact":{"id":"art_1"}}');
INSERT INTO artifacts (id, session_id, status, doc, created_at)
VALUES ('art_1', 'ses_old', 'final', '{"id":"art_1","name":"x","sha256":"{artifact}"}', 1);
`

// TestMigrateProjects: 009_projects puts the sessions stored before it in
// the default project and finds the blobs they already refer to.
func TestMigrateProjects(t *testing.T) {
	s := openBefore(t, "009_projects.sql", storetest.PreProjectsSQL(preProjectsSQL))
	require.NoError(t, s.Migrate(t.Context()))
	storetest.RequireProjectsMigrated(t, s)
}
