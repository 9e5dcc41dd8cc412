package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// callerRecorder is a Backend that records who ListSessions was called as.
type callerRecorder struct {
	server.Backend
	mu  sync.Mutex
	got []app.Caller
}

func (c *callerRecorder) ListSessions(ctx context.Context, p lt.ListSessionsParams) (*lt.List[lt.Session], error) {
	caller, ok := app.CallerFrom(ctx)
	if !ok {
		caller = app.Caller{Name: "(none)"}
	}
	c.mu.Lock()
	c.got = append(c.got, caller)
	c.mu.Unlock()
	return c.Backend.ListSessions(ctx, p)
}

func (c *callerRecorder) last() app.Caller {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[len(c.got)-1]
}

func newCallerHarness(t *testing.T, cfg *server.Config) (*harness, *callerRecorder) {
	rec := &callerRecorder{}
	h := newHarness(t, harnessOpts{cfg: cfg, wrap: func(b server.Backend) server.Backend {
		rec.Backend = b
		return rec
	}})
	return h, rec
}

// createKey creates a key as the bootstrap admin and returns it.
func (h *harness) createKey(body string) lt.APIKey {
	h.t.Helper()
	r := h.do(http.MethodPost, "/v1/keys", []byte(body), map[string]string{"Authorization": "Bearer boot-key"})
	require.Equal(h.t, http.StatusCreated, r.status, "body: %s", r.body)
	return decode[lt.APIKey](h.t, r)
}

func (h *harness) listSessionsAs(token string) *response {
	h.t.Helper()
	return h.do(http.MethodGet, "/v1/sessions", nil, map[string]string{"Authorization": "Bearer " + token})
}

// TestStoreKeyAuthentication: a bootstrap key calls as the admin
// "bootstrap", a stored key as its name, role and project; a revoked or an
// expired key is answered exactly as an unknown one (same status, headers
// and body bytes), at once.
func TestStoreKeyAuthentication(t *testing.T) {
	t.Parallel()
	h, rec := newCallerHarness(t, &server.Config{APIKeys: []string{"boot-key"}})

	require.Equal(t, http.StatusOK, h.listSessionsAs("boot-key").status)
	require.Equal(t, app.BootstrapCaller, rec.last())

	k := h.createKey(`{"name": "alice", "role": "approver", "project": "default"}`)
	r := h.listSessionsAs(k.Key)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, app.Caller{KeyID: k.ID, Name: "alice", Role: lt.RoleApprover, Project: "default"}, rec.last())

	unknown := h.listSessionsAs("lh_" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	requireError(t, unknown, http.StatusUnauthorized, lt.CodeUnauthorized, "")
	notOurs := h.listSessionsAs("some-other-token")
	require.Equal(t, unknown.body, notOurs.body, "a token of no key's shape is answered alike")

	r = h.do(http.MethodDelete, "/v1/keys/"+k.ID, nil, map[string]string{"Authorization": "Bearer boot-key"})
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	revoked := h.listSessionsAs(k.Key)
	require.Equal(t, unknown.status, revoked.status, "revoked: refused at once")
	require.Equal(t, unknown.body, revoked.body)
	require.Equal(t, unknown.header.Get("WWW-Authenticate"), revoked.header.Get("WWW-Authenticate"))

	// Expired: a row whose expiry has passed (the API refuses to create
	// one, so it is written to the store directly).
	past := time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
	token := "lh_" + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	require.NoError(t, h.store.APIKeyCreate(t.Context(), &store.APIKeyRow{ID: "key_expired", Name: "old", Role: "admin",
		Project: "default", Prefix: token[:11], TokenHash: app.HashKeyToken(token), CreatedAt: past.Add(-time.Hour), ExpiresAt: &past}))
	expired := h.listSessionsAs(token)
	require.Equal(t, unknown.status, expired.status, "expired")
	require.Equal(t, unknown.body, expired.body)
}

// TestKeyLastUsed: a key's first use is recorded, and further uses within
// app.TouchInterval write nothing.
func TestKeyLastUsed(t *testing.T) {
	t.Parallel()
	h, _ := newCallerHarness(t, &server.Config{APIKeys: []string{"boot-key"}})
	k := h.createKey(`{"name": "ci", "role": "operator"}`)
	row, err := h.store.APIKeyGet(t.Context(), k.ID)
	require.NoError(t, err)
	require.Nil(t, row.LastUsedAt, "not used yet")

	require.Equal(t, http.StatusOK, h.listSessionsAs(k.Key).status)
	row, err = h.store.APIKeyGet(t.Context(), k.ID)
	require.NoError(t, err)
	require.NotNil(t, row.LastUsedAt, "the first use is recorded")
	first := *row.LastUsedAt

	require.Equal(t, http.StatusOK, h.listSessionsAs(k.Key).status)
	row, err = h.store.APIKeyGet(t.Context(), k.ID)
	require.NoError(t, err)
	require.Equal(t, first, *row.LastUsedAt, "a use within a minute writes nothing")
}

// TestLocalCaller: without API keys a loopback peer is the admin "local",
// or the stored key its token names; a token that names none is ignored
// there, as it always was; a remote peer stays refused even with a stored
// key.
func TestLocalCaller(t *testing.T) {
	t.Parallel()
	h, rec := newCallerHarness(t, nil)
	require.Equal(t, http.StatusOK, h.get("/v1/sessions").status)
	require.Equal(t, app.LocalCaller, rec.last())
	require.Equal(t, http.StatusOK, h.listSessionsAs("whatever").status)
	require.Equal(t, app.LocalCaller, rec.last())

	r := h.post("/v1/keys", `{"name": "bob", "role": "reader", "project": "default"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	k := decode[lt.APIKey](t, r)
	require.Equal(t, http.StatusOK, h.listSessionsAs(k.Key).status)
	require.Equal(t, app.Caller{KeyID: k.ID, Name: "bob", Role: lt.RoleReader, Project: "default"}, rec.last())

	req := httptest.NewRequest(http.MethodGet, "/v1/sessions", nil)
	req.RemoteAddr = "203.0.113.9:4711"
	req.Host = "localhost"
	req.Header.Set("Authorization", "Bearer "+k.Key)
	w := httptest.NewRecorder()
	h.srv.ServeHTTP(w, req)
	require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
}
