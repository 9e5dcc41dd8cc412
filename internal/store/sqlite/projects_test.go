package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
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

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestMigrateProjects: 009_projects puts the sessions stored before it in
// the default project and finds the blobs they already refer to.
func TestMigrateProjects(t *testing.T) {
	s := openTest(t, nil)
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	require.Equal(t, "009_projects.sql", ms[8].Name)
	for _, m := range ms[:8] {
		raw(t, s, func(w *writer) error { return w.applyMigration(m, len(ms), s) })
	}
	names := map[string]string{"payload": digest("payload"), "upload": digest("upload"), "artifact": digest("artifact"), "snapshot": digest("snapshot")}
	raw(t, s, func(w *writer) error {
		var pairs []string
		for k, v := range names {
			pairs = append(pairs, "{"+k+"}", v)
		}
		_, err := w.conn.ExecContext(context.Background(), strings.NewReplacer(pairs...).Replace(preProjectsSQL))
		return err
	})

	require.NoError(t, s.Migrate(t.Context()))
	row, err := s.SessionGet(t.Context(), "ses_old")
	require.NoError(t, err)
	require.Equal(t, store.DefaultProject, row.Project)
	for name, want := range map[string]bool{"payload": true, "upload": true, "artifact": true, "snapshot": false} {
		in, err := s.BlobInProject(t.Context(), names[name], store.DefaultProject)
		require.NoError(t, err)
		require.Equal(t, want, in, "the %s blob", name)
	}
}
