package tool_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"sorted keys", `{"b":1,"a":2,"c":{"z":true,"y":null}}`, `{"a":2,"b":1,"c":{"y":null,"z":true}}`},
		{"whitespace", " {\n\t\"a\" : [ 1 , 2 ,\n 3 ] }\n", `{"a":[1,2,3]}`},
		{"numbers as written", `{"i":1,"f":1.0,"e":1e3,"n":-0.50,"big":123456789012345678901234567890}`, `{"big":123456789012345678901234567890,"e":1e3,"f":1.0,"i":1,"n":-0.50}`},
		{"string escapes normalised", `{"s":"\u0041\u00e9\/<&>\n\"\\"}`, `{"s":"Aé/<&>\n\"\\"}`},
		{"unicode keys by bytes", `{"é":1,"z":2,"A":3}`, `{"A":3,"z":2,"é":1}`},
		{"scalars", `"x"`, `"x"`},
		{"empty containers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tool.CanonicalJSON(json.RawMessage(tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			// Canonical form is a fixed point.
			again, err := tool.CanonicalJSON(got)
			require.NoError(t, err)
			require.Equal(t, string(got), string(again))
		})
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, "unexpected EOF"},
		{"duplicate key", `{"a":1,"a":2}`, `duplicate object key "a"`},
		{"nested duplicate", `{"x":[{"k":1,"k":1}]}`, `duplicate object key "k"`},
		{"trailing data", `{"a":1} {"b":2}`, "unexpected data after the top-level value"},
		{"trailing comma", `[1,]`, "invalid character"},
		{"truncated", `{"a":`, "unexpected EOF"},
		{"bare word", `nope`, "invalid character"},
		{"too deep", strings.Repeat("[", 1002) + strings.Repeat("]", 1002), "nested deeper"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tool.CanonicalJSON(json.RawMessage(tc.in))
			require.ErrorContains(t, err, tc.want)
			_, err = tool.ArgumentsSHA256(json.RawMessage(tc.in))
			require.Error(t, err)
		})
	}
}

func TestArgumentsSHA256StableAcrossKeyOrderAndWhitespace(t *testing.T) {
	t.Parallel()
	a, err := tool.ArgumentsSHA256(json.RawMessage(`{"to":"ceo@acme.com","subject":"Hi","cc":["a","b"]}`))
	require.NoError(t, err)
	b, err := tool.ArgumentsSHA256(json.RawMessage("{\n  \"cc\": [\"a\", \"b\"],\n  \"subject\": \"Hi\",\n  \"to\": \"ceo@acme.com\"\n}"))
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.Len(t, a, 64)

	// A different value, or a different array order, is a different hash.
	c, err := tool.ArgumentsSHA256(json.RawMessage(`{"to":"ceo@acme.com","subject":"Hi","cc":["b","a"]}`))
	require.NoError(t, err)
	require.NotEqual(t, a, c)

	// Known value: SHA-256 of "{}".
	empty, err := tool.ArgumentsSHA256(json.RawMessage(" { } "))
	require.NoError(t, err)
	require.Equal(t, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", empty)
}
