package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestIdempotencyKeyIsTheCallers: the same Idempotency-Key and body from a
// key of another project is another request (a new session of its own
// project), never a replay of the first caller's answer, which would hand
// it another project's session; the first caller's retry still replays.
func TestIdempotencyKeyIsTheCallers(t *testing.T) {
	h, _ := newCallerHarness(t, &server.Config{APIKeys: []string{"boot-key"}})
	operator := func(id, project string) map[string]string {
		tok := "lh_" + strings.Repeat(project[:1], 52)
		require.NoError(t, h.store.APIKeyCreate(t.Context(), &store.APIKeyRow{ID: id, Name: id, Role: string(lt.RoleOperator),
			Project: project, Prefix: tok[:11], TokenHash: app.HashKeyToken(tok), CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}))
		return map[string]string{"Authorization": "Bearer " + tok, "Idempotency-Key": "nightly-report"}
	}
	alpha, beta := operator("key_alpha", "alpha"), operator("key_beta", "beta")
	body := []byte(`{"agent_spec": {"model": {"provider": "scripted", "script": [{"text": "secret plan"}]}}, "input": "go"}`)

	first := h.do(http.MethodPost, "/v1/sessions", body, alpha)
	require.Equal(t, http.StatusCreated, first.status, "body: %s", first.body)
	a := decode[lt.Session](t, first)
	require.Equal(t, "alpha", a.Project)

	other := h.do(http.MethodPost, "/v1/sessions", body, beta)
	require.Equal(t, http.StatusCreated, other.status, "body: %s", other.body)
	require.Empty(t, other.header.Get("Idempotent-Replayed"), "another project's caller is not answered with a replay")
	b := decode[lt.Session](t, other)
	require.NotEqual(t, a.ID, b.ID)
	require.Equal(t, "beta", b.Project)

	again := h.do(http.MethodPost, "/v1/sessions", body, alpha)
	require.Equal(t, http.StatusCreated, again.status, "body: %s", again.body)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, a.ID, decode[lt.Session](t, again).ID)
}
