package sqlite

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// TestResourceProjectsMigration: the rows stored before agents, secrets
// and webhook endpoints had a project (migration 010 rebuilds the agents
// and secrets tables) keep every column and go to the default project,
// and the new keys hold: one name in two projects, never twice in one.
func TestResourceProjectsMigration(t *testing.T) {
	s := openTest(t, nil)
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	at := slices.IndexFunc(ms, func(m storeutil.Migration) bool { return m.Name == "010_resource_projects.sql" })
	require.Positive(t, at)
	raw(t, s, func(w *writer) error {
		for _, m := range ms[:at] {
			if err := w.applyMigration(m, len(ms), s); err != nil {
				return err
			}
		}
		for _, q := range []string{
			`INSERT INTO agents (name, version, spec, created_at) VALUES ('writer', 1, '{"v":1}', 11), ('writer', 2, '{"v":2}', 12)`,
			`INSERT INTO secrets (name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at)
			 VALUES ('TOKEN', x'0102', x'0304', 'k1', '["api.example.com"]', '{"bearer":true}', 21, 22)`,
			`INSERT INTO webhook_endpoints (id, url, events, secrets, created_at) VALUES ('whe_1', 'https://h.example.com/', '[]', '["whsec_1"]', 31)`,
		} {
			if _, err := w.conn.ExecContext(context.Background(), q); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, s.Migrate(t.Context()))

	agents, err := s.AgentList(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, agents, 1)
	require.Equal(t, "default", agents[0].Project)
	require.Equal(t, 2, agents[0].Version)
	require.JSONEq(t, `{"v":2}`, string(agents[0].Spec))
	require.Equal(t, fromMicros(12), agents[0].CreatedAt)
	first, err := s.AgentGet(t.Context(), "default", "writer", 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1}`, string(first.Spec))

	secret, err := s.SecretGet(t.Context(), "default", "TOKEN")
	require.NoError(t, err)
	require.Equal(t, []byte{1, 2}, secret.Ciphertext)
	require.Equal(t, []byte{3, 4}, secret.Nonce)
	require.Equal(t, "k1", secret.KeyID)
	require.Equal(t, []string{"api.example.com"}, secret.Hosts)
	require.Equal(t, fromMicros(21), secret.CreatedAt)
	require.Equal(t, fromMicros(22), secret.UpdatedAt)

	ep, err := s.WebhookEndpointGet(t.Context(), "whe_1")
	require.NoError(t, err)
	require.Equal(t, "default", ep.Project)

	raw(t, s, func(w *writer) error {
		ctx := context.Background()
		if _, err := w.conn.ExecContext(ctx, `INSERT INTO agents (project, name, version, created_at) VALUES ('support', 'writer', 1, 1)`); err != nil {
			return err
		}
		_, err := w.conn.ExecContext(ctx, `INSERT INTO agents (project, name, version, created_at) VALUES ('support', 'writer', 1, 2)`)
		require.Error(t, err, "a version is unique within its project")
		_, err = w.conn.ExecContext(ctx, `INSERT INTO secrets (project, name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at)
			VALUES ('support', 'TOKEN', x'01', x'02', 'k', '[]', '{}', 1, 1)`)
		return err
	})
}
