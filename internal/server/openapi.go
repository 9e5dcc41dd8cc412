package server

import (
	"net/http"

	"github.com/longhaul-dev/longhaul/internal/openapi"
)

// openAPIPattern is the route of the API's own description.
const openAPIPattern = "GET /v1/openapi.json"

// openAPI is GET /v1/openapi.json: the OpenAPI 3.1 document of every route
// (internal/openapi). Any authenticated caller may read it, a runner's key
// included: it holds no data, and serving it under /v1's one access rule
// keeps that rule without exceptions (API.md is silent on it).
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	writeJSONBytes(w, http.StatusOK, openapi.JSON())
	return nil
}
