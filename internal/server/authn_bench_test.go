package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// What authentication adds to a request (the bound: under 50 µs),
// timed alone: the access rule a /v1 request passes before its handler.
//
//	go test -run '^$' -bench Authentication -benchmem ./internal/server/
//
// with LONGHAUL_TEST_POSTGRES set for the PostgreSQL cases (skipped
// without it, failed under CI=true). A stored key costs one SHA-256 and one read by the unique
// token hash, on every request (no cache, so that a revocation holds at
// once on every node); the last-use write happens at most once per
// app.TouchInterval per key, so a steady benchmark shows the read alone.

// BenchmarkAuthentication times the bootstrap key, a stored key on each
// driver (and, for scale, a bare PostgreSQL round trip), and a user signed
// in by a trusted proxy.
func BenchmarkAuthentication(b *testing.B) {
	b.Run("bootstrap", func(b *testing.B) {
		st := openSQLite(b)
		benchAuthorize(b, st, benchEngine(b, st), "Bearer boot-key", app.BootstrapCaller)
	})
	b.Run("stored/sqlite", func(b *testing.B) {
		st := openSQLite(b)
		benchStoredKey(b, st, benchEngine(b, st))
	})
	b.Run("stored/postgres", func(b *testing.B) {
		st := openPostgres(b)
		benchStoredKey(b, st, benchEngine(b, st))
	})
	b.Run("postgres-round-trip", func(b *testing.B) {
		// The floor of any PostgreSQL read: "SELECT 1" on a pool of the
		// same server, for comparison with stored/postgres.
		ctx := context.Background()
		pool, err := pgxpool.New(ctx, pgtest.FreshSchema(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		b.ReportAllocs()
		for b.Loop() {
			var one int
			if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sso", func(b *testing.B) {
		st := openSQLite(b)
		benchAuthorize(b, st, benchEngine(b, st), "", app.ProxyUser{Name: "alice@example.com", Role: lt.RoleApprover, Project: "default"}.Caller())
	})
}

// benchStoredKey creates a key and times its authentication.
func benchStoredKey(b *testing.B, st store.Store, eng *engine.Engine) {
	a := apptest.New(b, st, eng, nil)
	k, err := a.CreateKey(app.WithCaller(context.Background(), app.LibraryCaller),
		&lt.CreateKeyRequest{Name: "bench", Role: lt.RoleReader})
	if err != nil {
		b.Fatal(err)
	}
	benchAuthorize(b, st, eng, "Bearer "+k.Key, app.Caller{KeyID: k.ID, Name: "bench", Role: lt.RoleReader, Project: lt.DefaultProject})
}

// benchAuthorize times the access rule of a server with a bootstrap key
// and single sign-on from 10.0.0.0/8 on a request from 10.0.0.1 with the
// authorization given ("": the proxy's user header instead), which must
// authenticate as want.
func benchAuthorize(b *testing.B, st store.Store, eng *engine.Engine, authorization string, want app.Caller) {
	a := apptest.New(b, st, eng, nil)
	srv := server.New(a, st, &server.Config{
		APIKeys: []string{"boot-key"}, Keys: a, Logger: slog.New(slog.DiscardHandler),
		TrustedProxyHeader: userHeader, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		ProxyUsers: []app.ProxyUser{{Name: "alice@example.com", Role: lt.RoleApprover}},
	})
	req := httptest.NewRequest(http.MethodGet, "/v1/sessions", nil)
	req.RemoteAddr = "10.0.0.1:40000"
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	} else {
		req.Header.Set(userHeader, "alice@example.com")
	}
	w := httptest.NewRecorder()
	// The first call records the key's use; the loop times the steady state.
	if c, err := server.Authorize(srv, w, req); err != nil || c != want {
		b.Fatalf("authenticated as %+v (%v), want %+v", c, err, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := server.Authorize(srv, w, req); err != nil {
			b.Fatal(err)
		}
	}
}

// openSQLite opens a migrated SQLite store in a temporary directory.
func openSQLite(b *testing.B) *sqlite.Store {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "longhaul.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return st
}

// openPostgres opens a migrated PostgreSQL store in a fresh schema.
func openPostgres(b *testing.B) *postgres.Store {
	dsn := pgtest.FreshSchema(b)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return st
}

// benchEngine is an engine on st that is never started (no poller adds
// to the figures): the App needs one, authentication does not use it.
func benchEngine(b *testing.B, st store.Store) *engine.Engine {
	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: filepath.Join(b.TempDir(), "workspaces"),
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	return eng
}
