package mcp

import (
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// An empty text item keeps its text field: a server that answers "" has
// answered, and a reader of the item (the model, a person) must see a text
// item, not a typed item without content. Other items still omit what they
// lack.
func TestEmptyTextItemKeepsItsText(t *testing.T) {
	res := result(&sdk.CallToolResult{Content: []sdk.Content{
		&sdk.TextContent{Text: ""},
		&sdk.TextContent{Text: "x"},
		&sdk.ImageContent{MIMEType: "image/png", Data: []byte{1, 2}},
	}})
	require.Empty(t, res.Error)
	out, err := json.Marshal(res.Output)
	require.NoError(t, err)
	require.JSONEq(t, `{"content":[{"type":"text","text":""},{"type":"text","text":"x"},{"type":"image","mime_type":"image/png","bytes":2}]}`, string(out))

	var back Output
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, res.Output, back, "the encoding reads back as it was")
}
