package openapi

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDocumentIsOpenAPI31(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(JSON(), &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.NotEmpty(t, doc.Paths)
}

func TestToJSONNamesANonStringKey(t *testing.T) {
	t.Parallel()
	_, err := toJSON([]byte("paths:\n  /x:\n    get:\n      responses:\n        200: {description: ok}\n"))
	require.ErrorContains(t, err, "/paths//x/get/responses: key 200 is not a string (quote it)")
}
