package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// TestResourceProjectsMigration: the rows stored before agents, secrets
// and webhook endpoints had a project go to the default project with
// every column kept, and the new keys hold: one name in two projects,
// never twice in one.
func TestResourceProjectsMigration(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := t.Context()
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	at := slices.IndexFunc(ms, func(m storeutil.Migration) bool { return m.Name == "010_resource_projects.sql" })
	require.Positive(t, at)
	conn, err := s.pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, createMigrationsTable)
	require.NoError(t, err)
	for _, m := range ms[:at] {
		require.NoError(t, s.applyMigration(ctx, conn, m))
	}
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO agents (name, version, spec, created_at) VALUES ('writer', 1, '{"v":1}', $1), ('writer', 2, '{"v":2}', $1)`,
		`INSERT INTO secrets (name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at)
		 VALUES ('TOKEN', '\x0102', '\x0304', 'k1', '{api.example.com}', '{"bearer":true}', $1, $1)`,
		`INSERT INTO webhook_endpoints (id, url, events, secrets, created_at) VALUES ('whe_1', 'https://h.example.com/', '{}', '{whsec_1}', $1)`,
	} {
		_, err := conn.Exec(ctx, q, created)
		require.NoError(t, err, q)
	}
	conn.Release()
	require.NoError(t, s.Migrate(ctx))

	agents, err := s.AgentList(ctx, "")
	require.NoError(t, err)
	require.Len(t, agents, 1)
	require.Equal(t, "default", agents[0].Project)
	require.Equal(t, 2, agents[0].Version)
	require.JSONEq(t, `{"v":2}`, string(agents[0].Spec))
	require.Equal(t, created, agents[0].CreatedAt)
	secret, err := s.SecretGet(ctx, "default", "TOKEN")
	require.NoError(t, err)
	require.Equal(t, []byte{1, 2}, secret.Ciphertext)
	require.Equal(t, []string{"api.example.com"}, secret.Hosts)
	ep, err := s.WebhookEndpointGet(ctx, "whe_1")
	require.NoError(t, err)
	require.Equal(t, "default", ep.Project)

	_, err = s.pool.Exec(ctx, `INSERT INTO agents (project, name, version, created_at) VALUES ('support', 'writer', 1, $1)`, created)
	require.NoError(t, err, "the same name and version in another project")
	_, err = s.pool.Exec(ctx, `INSERT INTO agents (project, name, version, created_at) VALUES ('support', 'writer', 1, $1)`, created)
	require.Error(t, err, "a version is unique within its project")
	_, err = s.pool.Exec(ctx, `INSERT INTO secrets (project, name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at)
		VALUES ('support', 'TOKEN', '\x01', '\x02', 'k', '{}', '{}', $1, $1)`, created)
	require.NoError(t, err)
}
