package longhaultype_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestTreeCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := lt.TreeCursor{"ses_b": 4, "ses_a": 12, "ses_new": 0}
	s := c.String()
	require.Equal(t, "t1.eyJzZXNfYSI6MTIsInNlc19iIjo0fQ", s, "keys sorted, zeros left out (the example in the doc)")
	require.True(t, lt.IsTreeCursor(s))
	require.False(t, lt.IsTreeCursor("42"))

	got, err := lt.ParseTreeCursor(s)
	require.NoError(t, err)
	require.Equal(t, lt.TreeCursor{"ses_a": 12, "ses_b": 4}, got)

	require.Equal(t, "t1.e30", lt.TreeCursor(nil).String(), "an empty cursor: every session from its start")
	empty, err := lt.ParseTreeCursor("t1.e30")
	require.NoError(t, err)
	require.Empty(t, empty)

	zero, err := lt.ParseTreeCursor(lt.TreeCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(`{"ses_a":0}`)))
	require.NoError(t, err)
	require.Empty(t, zero, "a session at 0 is the same as one not named")
}

func TestParseTreeCursorRefusesMalformed(t *testing.T) {
	t.Parallel()
	enc := func(s string) string { return lt.TreeCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, in := range map[string]string{
		"no prefix":      "eyJzZXNfYSI6MTJ9",
		"other version":  "t2.e30",
		"not base64url":  "t1.e30=",
		"padded":         "t1." + base64.URLEncoding.EncodeToString([]byte(`{"a":1}`)),
		"not an object":  enc(`[1,2]`),
		"null":           enc(`null`),
		"string seq":     enc(`{"ses_a":"12"}`),
		"fractional seq": enc(`{"ses_a":1.5}`),
		"negative seq":   enc(`{"ses_a":-1}`),
		"empty id":       enc(`{"":3}`),
		"trailing data":  enc(`{"ses_a":1}{}`),
		"empty body":     "t1.",
	} {
		_, err := lt.ParseTreeCursor(in)
		require.Error(t, err, name)
	}
}

// FuzzParseTreeCursor: a cursor that parses prints as a cursor that parses
// to the same positions, and nothing panics.
func FuzzParseTreeCursor(f *testing.F) {
	for _, seed := range []string{"t1.e30", "t1.eyJzZXNfYSI6MTIsInNlc19iIjo0fQ", "42", "t1.", "t1.bnVsbA", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := lt.ParseTreeCursor(s)
		if err != nil {
			return
		}
		again, err := lt.ParseTreeCursor(c.String())
		require.NoError(t, err)
		require.Equal(t, c, again)
		for id, seq := range c {
			require.NotEmpty(t, id)
			require.Positive(t, seq)
		}
	})
}
