package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	"github.com/longhaul-dev/longhaul/internal/vault"
	"github.com/longhaul-dev/longhaul/internal/webhook"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// New returns the App over eng and st. reports, when not nil, replaces the
// default report service (a test with its own clock).
func New(t testing.TB, st store.Store, eng *engine.Engine, reports *report.Service) *app.App {
	t.Helper()
	return NewWithClock(t, st, eng, reports, nil)
}

// NewWithClock is New with the App's clock (nil: time.Now).
func NewWithClock(t testing.TB, st store.Store, eng *engine.Engine, reports *report.Service, now func() time.Time) *app.App {
	t.Helper()
	key, err := vault.LoadKey("", filepath.Join(t.TempDir(), vault.DefaultKeyFile))
	require.NoError(t, err)
	v, err := vault.Open(st, key, nil)
	require.NoError(t, err)
	hooks, err := webhook.New(st, nil)
	require.NoError(t, err)
	if reports == nil {
		reports = report.New(st, nil)
	}
	a, err := app.New(app.Deps{Engine: eng, Vault: vault.NewAPI(v), Webhooks: webhook.NewAPI(hooks), Reports: reports, Store: st, Now: now})
	require.NoError(t, err)
	return a
}

// Engine opens a migrated SQLite store in t.TempDir() and starts an engine
// on it with the scripted model provider (clock, when not nil, is its
// clock); both end with the test.
func Engine(t testing.TB, clock engine.Clock) (*sqlite.Store, *engine.Engine) {
	t.Helper()
	st := SQLite(t)
	return st, EngineOn(t, st, clock)
}

// SQLite opens a migrated SQLite store in t.TempDir(), closed when the
// test ends.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// Postgres opens a migrated PostgreSQL store on a fresh schema of the test
// database (pgtest: the test skips without one, and fails under CI=true),
// closed when the test ends.
func Postgres(t testing.TB) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.FreshSchema(t), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// Drivers are the stores an App-level suite runs on, by name: SQLite, and
// PostgreSQL (which skips without a test database, and fails under
// CI=true).
var Drivers = map[string]func(testing.TB) store.Store{
	"sqlite":   func(t testing.TB) store.Store { return SQLite(t) },
	"postgres": func(t testing.TB) store.Store { return Postgres(t) },
}

// EngineOn starts an engine on st (migrated) with the scripted model
// provider, its workspaces in t.TempDir() (clock, when not nil, is its
// clock); it stops when the test ends.
func EngineOn(t testing.TB, st store.Store, clock engine.Clock) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: filepath.Join(t.TempDir(), "workspaces"),
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
		Logger:        slog.New(slog.DiscardHandler),
		PollInterval:  20 * time.Millisecond,
		Clock:         clock,
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, eng.Stop(stopCtx))
	})
	return eng
}

// WorkSpec is an agent of the scripted provider that leaves a session
// holding something of each kind a project isolates: it writes a file
// larger than the 64 KiB blob threshold (the call's payload goes to a
// blob; the content starts with project, so two projects' blobs differ),
// delivers it as an artifact (its content is a blob too) and ends the
// turn, leaving effects and checkpoints; the next turn asks for lookups
// lookups of a function tool the application answers (required actions).
func WorkSpec(t testing.TB, project string, lookups int) *lt.AgentSpec {
	t.Helper()
	args, err := json.Marshal(map[string]string{"path": "big.txt", "content": project + ": " + strings.Repeat("x", 70<<10)})
	require.NoError(t, err)
	script := `{"tool_calls": [{"name": "write_file", "arguments": ` + string(args) + `}]},
	  {"tool_calls": [{"name": "finish", "arguments": {"summary": "done", "artifacts": ["big.txt"]}}]}`
	for i := range lookups {
		script += fmt.Sprintf(`, {"tool_calls": [{"name": "lookup", "arguments": {"id": "%d"}}]}`, i+1)
	}
	var spec lt.AgentSpec
	require.NoError(t, json.Unmarshal([]byte(`{
	  "model": {"provider": "scripted", "script": [`+script+`]},
	  "instructions": "Work.",
	  "tools": [{"name": "write_file"}, {"name": "finish"},
	    {"name": "lookup", "type": "function", "effect": "read",
	     "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}]}`), &spec))
	return &spec
}
