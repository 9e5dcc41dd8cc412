package jsonstrict

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoneSurrogateScanner(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int{
		`"\ud800"`:        1,
		`"ok","\udfff"`:   6,
		`"\\\ud800"`:      3,
		`"\ud83d\ude80"`:  -1,
		`"\\ud800"`:       -1,
		`"\u0041\ud800"`:  7,
		`"\ud800\\u0041"`: 1,
		`{"a\udc00":1}`:   3,
		`"\ud800`:         1,
	} {
		off, found := loneSurrogate([]byte(body))
		if want < 0 {
			require.False(t, found, body)
			continue
		}
		require.True(t, found, body)
		require.Equal(t, want, off, body)
	}
}
