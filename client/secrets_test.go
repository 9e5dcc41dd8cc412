package client

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const clientCanary = "client-canary-0c9f2d71"

func TestPutSecret(t *testing.T) {
	t.Parallel()
	meta := lt.Secret{Name: "GITHUB_TOKEN", Hosts: []string{"api.github.com"},
		Inject: lt.SecretInjection{Header: "Authorization", Bearer: true}, CreatedAt: testTime, UpdatedAt: testTime}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			writeAPIError(w, http.StatusServiceUnavailable, lt.CodeUnavailable, "draining")
		case 1:
			writeJSON(w, http.StatusCreated, meta)
		default:
			writeJSON(w, http.StatusOK, meta)
		}
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)
	req := &lt.PutSecretRequest{Value: clientCanary, Hosts: []string{"api.github.com"}, Inject: &lt.SecretInjection{Bearer: true}}

	got, created, err := c.PutSecret(t.Context(), "GITHUB_TOKEN", req)
	require.NoError(t, err)
	require.True(t, created, "201")
	require.Equal(t, &meta, got)
	got, created, err = c.PutSecret(t.Context(), "GITHUB_TOKEN", req)
	require.NoError(t, err)
	require.False(t, created, "200")
	require.Equal(t, &meta, got)

	reqs := rc.all()
	require.Len(t, reqs, 3, "a 503 is retried: a PUT may be repeated")
	for _, r := range reqs {
		require.Equal(t, http.MethodPut, r.method)
		require.Equal(t, "/v1/secrets/GITHUB_TOKEN", r.path)
		require.JSONEq(t, `{"value":"`+clientCanary+`","hosts":["api.github.com"],"inject":{"bearer":true}}`, r.body)
		require.Empty(t, r.header.Get("Idempotency-Key"), "PUT needs no idempotency key")
	}
}

func TestPutSecretErrorsNeverShowTheValue(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"invalid_request","message":"at least one host is required","field":"hosts"}}`))
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)
	_, _, err := c.PutSecret(t.Context(), "TOKEN", &lt.PutSecretRequest{Value: clientCanary, Inject: &lt.SecretInjection{Bearer: true}})
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "hosts", ae.Field)
	require.NotContains(t, err.Error(), clientCanary)

	_, _, err = c.PutSecret(t.Context(), "", &lt.PutSecretRequest{Value: clientCanary})
	require.ErrorContains(t, err, "name is empty")
	require.NotContains(t, err.Error(), clientCanary)
	_, _, err = c.PutSecret(t.Context(), "TOKEN", nil)
	require.ErrorContains(t, err, "req is nil")
	require.Len(t, rc.all(), 1, "invalid calls send nothing")
}

func TestListAndDeleteSecrets(t *testing.T) {
	t.Parallel()
	list := lt.List[lt.Secret]{Data: []lt.Secret{{Name: "A_TOKEN", Hosts: []string{"a.example.com"},
		Inject: lt.SecretInjection{Header: "X-Api-Key", Format: "{value}"}, CreatedAt: testTime, UpdatedAt: testTime}}}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet:
			writeJSON(w, http.StatusOK, list)
		case r.URL.Path == "/v1/secrets/A_TOKEN":
			w.WriteHeader(http.StatusNoContent)
		default:
			writeAPIError(w, http.StatusNotFound, lt.CodeNotFound, "secret MISSING does not exist")
		}
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	got, err := c.ListSecrets(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, &list, got)
	_, err = c.ListSecrets(t.Context(), "support")
	require.NoError(t, err)
	require.NoError(t, c.DeleteSecret(t.Context(), "support", "A_TOKEN"))
	require.NoError(t, c.DeleteSecret(t.Context(), "", "A_TOKEN"))
	err = c.DeleteSecret(t.Context(), "", "MISSING")
	require.True(t, IsNotFound(err), "%v", err)
	require.ErrorContains(t, c.DeleteSecret(t.Context(), "", ""), "name is empty")

	reqs := rc.all()
	require.Len(t, reqs, 5)
	request := func(r recorded) string { return r.method + " " + r.path + "?" + r.query }
	require.Equal(t, "GET /v1/secrets?", request(reqs[0]))
	require.Equal(t, "GET /v1/secrets?project=support", request(reqs[1]))
	require.Equal(t, "DELETE /v1/secrets/A_TOKEN?project=support", request(reqs[2]))
	require.Equal(t, "DELETE /v1/secrets/A_TOKEN?", request(reqs[3]))
	require.Equal(t, "DELETE /v1/secrets/MISSING?", request(reqs[4]))
}
