package longhaultype_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Moved from cmd/longhaul (TestSameSpecIgnoresFormatting), with the
// comparison it tests.
func TestSameAgentSpecIgnoresFormatting(t *testing.T) {
	t.Parallel()
	a := lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[ {"text": "x", "usage": {"output_tokens": 1, "input_tokens": 2}} ]`)}}
	b := lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"usage":{"input_tokens":2,"output_tokens":1},"text":"x"}]`)}}
	same, err := lt.SameAgentSpec(&a, &b)
	require.NoError(t, err)
	require.True(t, same)
	b.Instructions = "other"
	same, err = lt.SameAgentSpec(&a, &b)
	require.NoError(t, err)
	require.False(t, same)
}

// TestSameAgentSpecRefusesDuplicateKeys: a raw part with a duplicate key
// has no one reading, so it is no definition to compare.
func TestSameAgentSpecRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	a := lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"x","text":"y"}]`)}}
	_, err := lt.SameAgentSpec(&a, &a)
	require.ErrorContains(t, err, `duplicate object key "text"`)
}

// A string is written as the encoder (HTML escaping off) writes it, whether
// or not it takes the short way for plain ASCII: every byte alone, between
// plain letters, and strings of several escapes and multi-byte characters.
func TestCanonicalJSONStringsAsTheEncoderWritesThem(t *testing.T) {
	t.Parallel()
	var cases []string
	for b := 0; b < 256; b++ {
		cases = append(cases, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"z")
	}
	cases = append(cases, "", "plain words, digits 0-9 and ~!@#$%^&*()_+{}|:<>?", "é", "\u2028\u2029", "tab\there", "a\"b\\c", "\xff\xfe", "日本語")
	for _, s := range cases {
		raw, err := json.Marshal(s)
		require.NoError(t, err)
		var decoded string // invalid UTF-8 is U+FFFD now
		require.NoError(t, json.Unmarshal(raw, &decoded))
		var want strings.Builder
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(decoded))
		got, err := lt.CanonicalJSON(raw)
		require.NoError(t, err)
		require.Equal(t, strings.TrimSuffix(want.String(), "\n"), string(got), "%q", s)
		obj, err := lt.CanonicalJSON(json.RawMessage(`{` + string(raw) + `:` + string(raw) + `}`))
		require.NoError(t, err)
		require.Equal(t, "{"+string(got)+":"+string(got)+"}", string(obj), "%q", s)
	}
}
