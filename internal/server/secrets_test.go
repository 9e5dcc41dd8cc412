package server_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// secretCanary must never appear in a response, a log line or the database.
const secretCanary = "canary-secret-5b0d1e7a94c3"

// secretsHarness is the real stack with a vault whose key file lives in its
// own directory (apart from the database, as it should).
type secretsHarness struct {
	*harness
	// responses collects every response body, for the canary checks.
	responses [][]byte
}

func newSecretsHarness(t *testing.T) *secretsHarness {
	t.Helper()
	return &secretsHarness{harness: newHarness(t, harnessOpts{})}
}

func (h *secretsHarness) send(method, path, body string) *response {
	h.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	r := h.do(method, path, b, nil)
	h.responses = append(h.responses, r.body)
	return r
}

func TestSecretsEndpoints(t *testing.T) {
	t.Parallel()
	h := newSecretsHarness(t)

	r := h.send(http.MethodPut, "/v1/secrets/GITHUB_TOKEN",
		`{"value": "`+secretCanary+`", "hosts": ["api.github.com"], "inject": {"header": "Authorization", "format": "Bearer {value}"}}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	s := decode[lt.Secret](t, r)
	require.Equal(t, "GITHUB_TOKEN", s.Name)
	require.Equal(t, []string{"api.github.com"}, s.Hosts)
	require.Equal(t, lt.SecretInjection{Header: "Authorization", Format: "Bearer {value}"}, s.Inject)
	require.False(t, s.CreatedAt.IsZero())
	require.Equal(t, s.CreatedAt, s.UpdatedAt)

	// Replacing answers 200 and keeps the creation time.
	r = h.send(http.MethodPut, "/v1/secrets/GITHUB_TOKEN",
		`{"value": "`+secretCanary+`-2", "hosts": ["api.github.com", "*.githubusercontent.com"], "inject": {"bearer": true}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	replaced := decode[lt.Secret](t, r)
	require.Equal(t, s.CreatedAt, replaced.CreatedAt)
	require.Equal(t, lt.SecretInjection{Header: "Authorization", Bearer: true}, replaced.Inject)

	r = h.send(http.MethodPut, "/v1/secrets/REGISTRY_PASSWORD",
		`{"value": "registry-password", "hosts": ["registry.example.com"], "inject": {"basic": {"username": "ci"}}}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	r = h.send(http.MethodGet, "/v1/secrets", "")
	require.Equal(t, http.StatusOK, r.status)
	list := decode[lt.List[lt.Secret]](t, r)
	require.Nil(t, list.NextCursor)
	require.Len(t, list.Data, 2)
	require.Equal(t, "GITHUB_TOKEN", list.Data[0].Name)
	require.Equal(t, "REGISTRY_PASSWORD", list.Data[1].Name)
	require.Equal(t, &lt.SecretBasicAuth{Username: "ci"}, list.Data[1].Inject.Basic)

	r = h.send(http.MethodDelete, "/v1/secrets/GITHUB_TOKEN", "")
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	require.Empty(t, r.body)
	requireError(t, h.send(http.MethodDelete, "/v1/secrets/GITHUB_TOKEN", ""), http.StatusNotFound, lt.CodeNotFound, "")
	r = h.send(http.MethodGet, "/v1/secrets", "")
	require.Len(t, decode[lt.List[lt.Secret]](t, r).Data, 1)

	// Only PUT, GET and DELETE are routes.
	r = h.send(http.MethodPost, "/v1/secrets/GITHUB_TOKEN", `{}`)
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	r = h.send(http.MethodGet, "/v1/secrets/REGISTRY_PASSWORD", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status, "a value is never readable back")

	h.requireNoCanary(t)
}

// TestSecretErrorsNeverShowTheValue sends the canary with something wrong
// each time: the error names the field, and neither the response nor the
// server's log holds the value.
func TestSecretErrorsNeverShowTheValue(t *testing.T) {
	t.Parallel()
	h := newSecretsHarness(t)
	good := `"hosts": ["api.example.com"], "inject": {"bearer": true}`
	for _, tc := range []struct {
		name, path, body, field string
		status                  int
	}{
		{"unknown field", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", "valu": "` + secretCanary + `", ` + good + `}`, "valu", 400},
		{"unknown nested field", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", "hosts": ["a.example.com"], "inject": {"bearer": true, "token": "` + secretCanary + `"}}`, "inject.token", 400},
		{"hosts of the wrong type", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", "hosts": "api.example.com", "inject": {"bearer": true}}`, "hosts", 400},
		{"value of the wrong type", "/v1/secrets/TOKEN", `{"value": ["` + secretCanary + `"], ` + good + `}`, "value", 400},
		{"bad host", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", "hosts": ["https://api.example.com"], "inject": {"bearer": true}}`, "hosts[0]", 400},
		{"no hosts", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", "inject": {"bearer": true}}`, "hosts", 400},
		{"no inject", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", "hosts": ["api.example.com"]}`, "inject", 400},
		{"bad inject", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", "hosts": ["api.example.com"], "inject": {"header": "Host"}}`, "inject.header", 400},
		{"line break in the value", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `\r\nX-Evil: 1", ` + good + `}`, "value", 400},
		{"short value", "/v1/secrets/TOKEN", `{"value": "abc", ` + good + `}`, "value", 400},
		{"bad name", "/v1/secrets/lower_case", `{"value": "` + secretCanary + `", ` + good + `}`, "name", 400},
		{"malformed JSON", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", ` + good, "", 400},
		{"trailing data", "/v1/secrets/TOKEN", `{"value": "` + secretCanary + `", ` + good + `} "` + secretCanary + `"`, "", 400},
		{"empty body", "/v1/secrets/TOKEN", ``, "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.send(http.MethodPut, tc.path, tc.body)
			requireError(t, r, tc.status, lt.CodeInvalidRequest, tc.field)
		})
	}
	big := `{"value": "` + strings.Repeat("x", server.DefaultMaxBodyBytes) + secretCanary + `", ` + good + `}`
	r := h.send(http.MethodPut, "/v1/secrets/TOKEN", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)

	r = h.send(http.MethodGet, "/v1/secrets", "")
	require.Empty(t, decode[lt.List[lt.Secret]](t, r).Data, "nothing was stored")
	h.requireNoCanary(t)
	require.Contains(t, h.logs.String(), "request rejected", "the log has the rejections")
}

// requireNoCanary checks every response so far, the server's log and the
// database files for any form of the canary.
func (h *secretsHarness) requireNoCanary(t *testing.T) {
	t.Helper()
	forms := []string{secretCanary, base64.StdEncoding.EncodeToString([]byte(secretCanary))[:16]}
	for i, body := range h.responses {
		for _, f := range forms {
			require.NotContains(t, string(body), f, "response %d", i)
		}
	}
	for _, f := range forms {
		require.NotContains(t, h.logs.String(), f, "server log")
	}
	dir := filepath.Dir(h.store.Path())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	scanned := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), filepath.Base(h.store.Path())) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		scanned++
		for _, f := range forms {
			require.False(t, bytes.Contains(data, []byte(f)), "%s holds the canary", e.Name())
		}
	}
	require.GreaterOrEqual(t, scanned, 1, "the database file was scanned")
}
