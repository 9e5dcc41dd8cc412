package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// FuzzParseErrorBody: any error body a server sends yields a one-line message
// without the key, and never a panic.
func FuzzParseErrorBody(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"Rate limit reached.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`))
	f.Add([]byte(`{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`))
	f.Add([]byte(`{"error":"model 'llama9' not found"}`))
	f.Add([]byte(`{"detail":"Not Found"}`))
	f.Add([]byte(`<html>502</html>`))
	f.Add([]byte(`key ` + testKey + ` rejected`))
	f.Add([]byte(`{"error":{"message":["not","a","string"],"code":{"x":1}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b := parseErrorBody(body)
		c := classifier{key: testKey}
		msg := c.message(firstNonEmpty(b.code, b.typ, "HTTP 400"), b.msg)
		require.NotContains(t, msg, testKey)
		require.NotContains(t, msg, "\n")
		require.LessOrEqual(t, len(msg), model.MaxMessageLen+len("…"))
		_ = contextTooLong(400, b)
	})
}

// FuzzParseArguments: whatever a model streams as arguments, the tool call's
// Arguments are valid JSON, and valid JSON is kept as it came.
func FuzzParseArguments(f *testing.F) {
	f.Add(`{"path":"a.txt"}`)
	f.Add(`{"path":"a.txt","content":"unterminated`)
	f.Add(``)
	f.Add(`  `)
	f.Add(`[1,2]`)
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		got := parseArguments(s)
		require.True(t, json.Valid(got), "%q gave %q", s, got)
		if trimmed := strings.TrimSpace(s); trimmed != "" && json.Valid([]byte(trimmed)) {
			require.Equal(t, trimmed, string(got))
		}
	})
}
