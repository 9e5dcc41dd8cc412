package longhaultype_test

import (
	"encoding/json"
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
