// Package apptest builds the application service for tests that serve or
// call it over a real engine: the App as internal/node wires it, with a
// vault whose key file lives in a directory of its own (apart from the
// database, as it should), the webhooks' API and the reports.
//
// Only tests import it. It imports internal/app and what an App is made of.
package apptest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/vault"
	"github.com/longhaul-dev/longhaul/internal/webhook"
)

// New returns the App over eng and st. reports, when not nil, replaces the
// default report service (a test with its own clock).
func New(t testing.TB, st store.Store, eng *engine.Engine, reports *report.Service) *app.App {
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
	a, err := app.New(app.Deps{Engine: eng, Vault: vault.NewAPI(v), Webhooks: webhook.NewAPI(hooks), Reports: reports})
	require.NoError(t, err)
	return a
}
