package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateSessionSpecs: 019_session_specs moves the specs larger than
// specInlineMax of the sessions stored before it into session_specs, and
// every session reads back the spec it had.
func TestMigrateSessionSpecs(t *testing.T) {
	// "é" is two bytes: the limit counts bytes, as the driver does.
	large := `{"instructions":"` + strings.Repeat("é", specInlineMax/2) + `"}`
	small := `{"instructions":"be brief"}`
	s := openBefore(t, "019_session_specs.sql", `
INSERT INTO sessions (id, project, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at) VALUES
  ('ses_a', 'alpha', 'agent', 1, 'idle', ?, '{"a":1}', 0, 1, 1),
  ('ses_b', 'alpha', 'agent', 1, 'idle', ?, '{"b":2}', 0, 2, 2),
  ('ses_c', 'alpha', 'agent', 1, 'idle', NULL, '{"c":3}', 0, 3, 3)`, large, small)
	require.NoError(t, s.Migrate(t.Context()))

	for id, want := range map[string]string{"ses_a": large, "ses_b": small, "ses_c": ""} {
		r, err := s.SessionGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, want, string(r.Spec), id)
	}
	var inRow, apart int
	raw(t, s, func(w *writer) error {
		return w.conn.QueryRowContext(context.Background(),
			`SELECT (SELECT count(*) FROM sessions WHERE spec IS NOT NULL), (SELECT count(*) FROM session_specs)`).Scan(&inRow, &apart)
	})
	require.Equal(t, 1, inRow, "the small spec stays in its row")
	require.Equal(t, 1, apart, "the large spec has a row of its own")
}

// TestSessionSpecsQueryPlans: a session's read finds a spec kept apart by
// its key, scanning no table.
func TestSessionSpecsQueryPlans(t *testing.T) {
	s := openMigrated(t, nil)
	plan := queryPlan(t, s, "SELECT "+sessionColumns+" FROM sessions WHERE id = ?", "ses_x")
	require.NotEmpty(t, plan)
	for _, p := range plan {
		require.NotContains(t, p, "SCAN", "every table is searched by its key: %v", plan)
	}
}
