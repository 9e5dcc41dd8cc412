// Package openapi holds the OpenAPI 3.1 document of the HTTP API
// (openapi.yaml, written by hand and embedded): what GET /v1/openapi.json
// serves and `longhaul openapi` prints. Its schemas mirror the wire types of
// longhaultype.
//
// It is kept true by tests rather than generated: the server's tests fail
// when a route the server registers is missing from the document (or the
// document lists one the server lacks), and the end-to-end tests check the
// real binary's answers against it with an OpenAPI validator.
//
// It imports the standard library and a YAML decoder. Who may import it:
// cmd/longhaul, internal/server and tests.
package openapi
