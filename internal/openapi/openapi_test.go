package openapi

import (
	"encoding/json"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi/datamodel"
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

// TestDocumentValidates: the document is a valid OpenAPI 3.1 document by
// the specification's own schema, as a maintained validator reads it.
func TestDocumentValidates(t *testing.T) {
	t.Parallel()
	doc, err := libopenapi.NewDocumentWithConfiguration(JSON(), &datamodel.DocumentConfiguration{
		// A span's children are spans, a session's sub-agents sessions:
		// arrays end the recursion.
		IgnoreArrayCircularReferences: true,
	})
	require.NoError(t, err)
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	ok, verrs := v.ValidateDocument()
	for _, e := range verrs {
		t.Errorf("%s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			t.Errorf("  at %s: %s", se.FieldPath, se.Reason)
		}
	}
	require.True(t, ok)
}
