package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestProjectsOverHTTP: the project of agents, secrets and webhook
// endpoints over the HTTP API, for an operator key of project support (a
// row written to the store directly) and the bootstrap admin:
// body "project" and ?project= reach the service, a key naming another
// project is a 403 on the field project, another project's endpoint a 404.
func TestProjectsOverHTTP(t *testing.T) {
	t.Parallel()
	h, _ := newCallerHarness(t, &server.Config{APIKeys: []string{"boot-key"}})
	token := "lh_" + "cccccccccccccccccccccccccccccccccccccccccccccccccccc"
	require.NoError(t, h.store.APIKeyCreate(t.Context(), &store.APIKeyRow{ID: "key_support", Name: "support-bot", Role: string(lt.RoleOperator),
		Project: "support", Prefix: token[:11], TokenHash: app.HashKeyToken(token), CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}))
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	admin, support := as("boot-key"), as(token)
	agent := func(project string) []byte {
		return []byte(`{"name": "writer", "project": "` + project + `", "spec": {"model": {"provider": "scripted", "script": [{"text": "hi"}]}}}`)
	}

	r := h.do(http.MethodPost, "/v1/agents", agent("support"), admin)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "support", decode[lt.Agent](t, r).Project)
	r = h.do(http.MethodPost, "/v1/agents", agent(""), admin)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, lt.DefaultProject, decode[lt.Agent](t, r).Project)
	require.Equal(t, 1, decode[lt.Agent](t, r).Version)
	requireError(t, h.do(http.MethodPost, "/v1/agents", agent(lt.DefaultProject), support), http.StatusForbidden, lt.CodeForbidden, "project")

	r = h.do(http.MethodGet, "/v1/agents", nil, support)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	l := decode[lt.List[lt.Agent]](t, r)
	require.Len(t, l.Data, 1)
	require.Equal(t, "support", l.Data[0].Project)
	requireError(t, h.do(http.MethodGet, "/v1/agents?project=default", nil, support), http.StatusForbidden, lt.CodeForbidden, "project")
	r = h.do(http.MethodGet, "/v1/agents?project=support", nil, admin)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Len(t, decode[lt.List[lt.Agent]](t, r).Data, 1)
	r = h.do(http.MethodGet, "/v1/agents", nil, admin)
	require.Len(t, decode[lt.List[lt.Agent]](t, r).Data, 2)
	requireError(t, h.do(http.MethodGet, "/v1/agents?project=Bad", nil, admin), http.StatusBadRequest, lt.CodeInvalidRequest, "project")
	requireError(t, h.do(http.MethodGet, "/v1/agents?project=a&project=b", nil, admin), http.StatusBadRequest, lt.CodeInvalidRequest, "project")
	r = h.do(http.MethodGet, "/v1/agents/writer?project=support", nil, admin)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "support", decode[lt.Agent](t, r).Project)

	// Secrets: the admin's, by project.
	secret := []byte(`{"value": "support-token-value", "hosts": ["api.example.com"], "inject": {"bearer": true}, "project": "support"}`)
	r = h.do(http.MethodPut, "/v1/secrets/TOKEN", secret, admin)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "support", decode[lt.Secret](t, r).Project)
	r = h.do(http.MethodGet, "/v1/secrets?project=default", nil, admin)
	require.Empty(t, decode[lt.List[lt.Secret]](t, r).Data)
	requireError(t, h.do(http.MethodDelete, "/v1/secrets/TOKEN", nil, admin), http.StatusNotFound, lt.CodeNotFound, "")
	r = h.do(http.MethodDelete, "/v1/secrets/TOKEN?project=support", nil, admin)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)

	// Webhook endpoints.
	r = h.do(http.MethodPost, "/v1/webhooks/endpoints", []byte(`{"url": "https://hooks.example.com/d"}`), admin)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	defEP := decode[lt.WebhookEndpoint](t, r)
	require.Equal(t, lt.DefaultProject, defEP.Project)
	r = h.do(http.MethodPost, "/v1/webhooks/endpoints", []byte(`{"url": "https://hooks.example.com/s"}`), support)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	ownEP := decode[lt.WebhookEndpoint](t, r)
	require.Equal(t, "support", ownEP.Project)
	r = h.do(http.MethodGet, "/v1/webhooks/endpoints", nil, support)
	eps := decode[lt.List[lt.WebhookEndpoint]](t, r).Data
	require.Len(t, eps, 1)
	require.Equal(t, ownEP.ID, eps[0].ID)
	requireError(t, h.do(http.MethodGet, "/v1/webhooks/deliveries?project=default", nil, support), http.StatusForbidden, lt.CodeForbidden, "project")
	requireError(t, h.do(http.MethodDelete, "/v1/webhooks/endpoints/"+defEP.ID, nil, support), http.StatusNotFound, lt.CodeNotFound, "")
	r = h.do(http.MethodDelete, "/v1/webhooks/endpoints/"+ownEP.ID, nil, support)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	r = h.do(http.MethodGet, "/v1/webhooks/endpoints", nil, admin)
	require.Len(t, decode[lt.List[lt.WebhookEndpoint]](t, r).Data, 1, "the default project's endpoint is untouched")
}
