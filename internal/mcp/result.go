package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Codes of errors the SDK makes up for a connection that is closing: they
// say nothing about the call, unlike the codes a server answers with.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
)

// isProtocolError reports whether err is a JSON-RPC error the server sent:
// it answered, so the call did not run (and the connection is fine).
func isProtocolError(err error) bool {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return false
	}
	return we.Code != codeClientClosing && we.Code != codeServerClosing
}

func protocolMessage(err error) string {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return fmt.Sprintf("error %d: %s", we.Code, we.Message)
	}
	return err.Error()
}

// Output is what the model reads of a tool's result: the content items
// (text as it is; images and audio by type, MIME type and size, since their
// bytes mean nothing to a text model and would bloat the journal; resource
// links and embedded resources by URI, with an embedded text resource's
// text) and the structured content, when the tool returned some.
type Output struct {
	Content           []ContentItem `json:"content"`
	StructuredContent any           `json:"structured_content,omitempty"`
}

// ContentItem is one item of a tool's result content.
type ContentItem struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	URI      string `json:"uri,omitempty"`
	Name     string `json:"name,omitempty"`
	// Bytes is the size of binary data that is not reproduced.
	Bytes int `json:"bytes,omitempty"`
}

// MarshalJSON keeps a text item's text even when it is empty: a text item
// without its `text` field is not a text item to a reader (nor to the MCP
// schema), and an empty answer is still an answer.
func (c ContentItem) MarshalJSON() ([]byte, error) {
	type plain ContentItem // without this method
	if c.Type != "text" {
		return json.Marshal(plain(c))
	}
	return json.Marshal(struct {
		plain
		Text string `json:"text"` // shadows plain's, which omits it when empty
	}{plain(c), c.Text})
}

// result turns a tools/call result into a CallResult.
func result(res *sdk.CallToolResult) *CallResult {
	out := Output{Content: make([]ContentItem, 0, len(res.Content)), StructuredContent: res.StructuredContent}
	var texts []string
	for _, c := range res.Content {
		item := contentItem(c)
		out.Content = append(out.Content, item)
		if item.Text != "" {
			texts = append(texts, item.Text)
		}
	}
	if res.IsError {
		// The tool ran and failed: the model reads why and may try
		// otherwise.
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "the tool reported an error without a message"
		}
		return &CallResult{Error: msg}
	}
	return &CallResult{Output: out}
}

func contentItem(c sdk.Content) ContentItem {
	switch c := c.(type) {
	case *sdk.TextContent:
		return ContentItem{Type: "text", Text: c.Text}
	case *sdk.ImageContent:
		return ContentItem{Type: "image", MIMEType: c.MIMEType, Bytes: len(c.Data)}
	case *sdk.AudioContent:
		return ContentItem{Type: "audio", MIMEType: c.MIMEType, Bytes: len(c.Data)}
	case *sdk.ResourceLink:
		return ContentItem{Type: "resource_link", URI: c.URI, Name: c.Name, MIMEType: c.MIMEType}
	case *sdk.EmbeddedResource:
		item := ContentItem{Type: "resource"}
		if r := c.Resource; r != nil {
			item.URI, item.MIMEType, item.Text = r.URI, r.MIMEType, r.Text
			item.Bytes = len(r.Blob)
		}
		return item
	default:
		return ContentItem{Type: "unknown"}
	}
}
