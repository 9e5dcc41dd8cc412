package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, field string
		parts             []string
	}{
		{"top level", `{"input":"a","input":"b"}`, "input", []string{`duplicate key "input"`}},
		{"escaped spelling of the same key", `{"input":"a","\u0069nput":"b"}`, "input", []string{`duplicate key "input"`}},
		{"another case of a field's name", `{"input":"a","Input":"b"}`, "Input", []string{`duplicate key "Input"`, `"input" names the same field`}},
		{"nested struct", `{"input":"x","budget":{"max_cost_usd":1,"max_cost_usd":100}}`, "budget.max_cost_usd", nil},
		{"in an array element", `{"input":"x","agent_spec":{"model":{"provider":"scripted"},"tools":[{"name":"shell"},{"name":"finish","name":"shell"}]}}`,
			"agent_spec.tools[1].name", nil},
		{"free-form metadata", `{"input":"x","metadata":{"a":1,"b":{"c":1,"c":2}}}`, "metadata.b.c", nil},
		{"a script step (free-form JSON)", `{"input":"x","agent_spec":{"model":{"provider":"scripted","script":[{"text":"a","text":"b"}]}}}`,
			"agent_spec.model.script[0].text", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := decodeCreateSession([]byte(tc.body))
			require.Nil(t, req)
			requireInvalid(t, err, tc.field, tc.parts...)
		})
	}
	// Keys that differ only in case are distinct in free-form JSON, and the
	// same key may appear in sibling objects.
	req, err := decodeCreateSession([]byte(`{"input":"x","metadata":{"a":1,"A":2,"n":{"a":1},"m":{"a":1}},"constraints":["a","a"]}`))
	require.NoError(t, err)
	require.Equal(t, "x", req.Input)

	d, err := decodeDecision([]byte(`{"decision":"approve","arguments":{"to":"a@b.c","to":"ceo@acme.com"}}`))
	require.Nil(t, d)
	requireInvalid(t, err, "arguments.to", "duplicate key")
}

func TestDecodeRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, field string
		parts             []string
	}{
		{"a raw invalid byte in a value", "{\"input\":\"ab\xffcd\"}", "input", []string{"invalid UTF-8 at byte offset 12"}},
		{"a truncated sequence", "{\"input\":\"x\",\"goal\":\"\xe2\x82\"}", "goal", []string{"invalid UTF-8"}},
		{"an overlong encoding", "{\"input\":\"\xc0\xaf\"}", "input", []string{"invalid UTF-8"}},
		{"an encoded surrogate", "{\"input\":\"\xed\xa0\x80\"}", "input", []string{"invalid UTF-8"}},
		{"in a key", "{\"inp\xffut\":\"x\"}", "", []string{"invalid UTF-8 at byte offset 5"}},
		{"in broken JSON", "{\"input\":\xff", "", []string{"invalid UTF-8 at byte offset 9"}},
		{"an escaped lone high surrogate", `{"input":"a\ud800b"}`, "input", []string{"lone surrogate at byte offset 11"}},
		{"an escaped lone low surrogate", `{"input":"\udc00"}`, "input", []string{"lone surrogate"}},
		{"a high surrogate followed by a non-surrogate", `{"input":"\ud800\u0041"}`, "input", []string{"lone surrogate"}},
		{"a lone surrogate in free-form JSON", `{"input":"x","metadata":{"k":["\uDBFF"]}}`, "metadata.k[0]", []string{"lone surrogate"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := decodeCreateSession([]byte(tc.body))
			require.Nil(t, req)
			requireInvalid(t, err, tc.field, tc.parts...)
		})
	}
	// Valid text passes as it is: multi-byte characters, a surrogate pair
	// escaped, an escaped backslash before a "u".
	req, err := decodeCreateSession([]byte(`{"input":"héllo ✓ 🚀 \ud83d\ude80 \\ud800"}`))
	require.NoError(t, err)
	require.Equal(t, `héllo ✓ 🚀 🚀 \ud800`, req.Input)
}
