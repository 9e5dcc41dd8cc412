package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/openapi"
	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// openAPIOperation names an operation of the document: "GET /v1/x/{id}".
// A route's "{path...}" (the rest of the URL path) is "{path}" there.
func openAPIOperation(pattern string) string {
	return strings.ReplaceAll(pattern, "...}", "}")
}

// TestOpenAPICoversEveryRoute: the document served at /v1/openapi.json
// describes every route the server registers (with /metrics on), and no
// route it does not register.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"boot-key"}, Metrics: metricsOK}})

	res := h.do(http.MethodGet, "/v1/openapi.json", nil, map[string]string{"Authorization": "Bearer boot-key"})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Equal(t, openapi.JSON(), res.body)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(res.body, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)

	var documented []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	var registered []string
	for _, r := range h.srv.Routes() {
		op := openAPIOperation(r.Pattern)
		registered = append(registered, op)
		require.Contains(t, documented, op, "route %q is missing from internal/openapi/openapi.yaml: describe it", r.Pattern)
	}
	for _, op := range documented {
		require.True(t, slices.Contains(registered, op), "internal/openapi/openapi.yaml describes %q, which the server does not register", op)
	}
}

// TestOpenAPIIsForCallers: the document is under /v1's access rule (the
// key of any role that uses the API will do), like every other /v1 route;
// a runner's key, which opens its connection and nothing else, is refused.
func TestOpenAPIIsForCallers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"boot-key"}}})
	res := h.do(http.MethodGet, "/v1/openapi.json", nil, nil)
	require.Equal(t, http.StatusUnauthorized, res.status, string(res.body))
	reader := h.createKey(`{"name": "docs", "role": "reader"}`)
	res = h.do(http.MethodGet, "/v1/openapi.json", nil, map[string]string{"Authorization": "Bearer " + reader.Key})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	runner := h.createKey(`{"name": "box1", "role": "runner"}`)
	res = h.do(http.MethodGet, "/v1/openapi.json", nil, map[string]string{"Authorization": "Bearer " + runner.Key})
	e := requireError(t, res, http.StatusForbidden, lt.CodeForbidden, "")
	require.Contains(t, e.Message, "a runner key opens its connection and nothing else")
}
