package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestOpenAPIPrintsTheDocument: `longhaul openapi` prints the OpenAPI 3.1
// document as JSON, and with --yaml the same document as YAML.
func TestOpenAPIPrintsTheDocument(t *testing.T) {
	t.Parallel()
	var fromJSON map[string]any
	require.NoError(t, json.Unmarshal([]byte(cliOK(t, "openapi")), &fromJSON))
	require.Equal(t, "3.1.0", fromJSON["openapi"])
	require.Contains(t, fromJSON["paths"], "/v1/sessions/{id}/actions/{action_id}")

	var fromYAML map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(cliOK(t, "openapi", "--yaml")), &fromYAML))
	require.Equal(t, len(fromJSON["paths"].(map[string]any)), len(fromYAML["paths"].(map[string]any)))
}
