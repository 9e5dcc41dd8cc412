package apptest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	"github.com/longhaul-dev/longhaul/internal/vault"
	"github.com/longhaul-dev/longhaul/internal/webhook"
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
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	t.Cleanup(func() { require.NoError(t, st.Close()) })

	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"),
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
	return st, eng
}
