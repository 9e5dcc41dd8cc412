package tool

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeadTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		max       int
		input     string
		want      string
		truncated bool
	}{
		{"fits", 10, "hello", "hello", false},
		{"exactly full", 10, "0123456789", "0123456789", false},
		{"one over", 10, "0123456789X", "01234\n[... 1 bytes truncated ...]\n6789X", true},
		{"long", 6, strings.Repeat("a", 100) + "xyz", "aaa\n[... 97 bytes truncated ...]\nxyz", true},
		// "é" is 2 bytes: a cut inside it drops the whole character.
		{"rune cut at head end", 6, "aaé" + strings.Repeat("b", 20) + "ccc", "aa\n[... 22 bytes truncated ...]\nccc", true},
		{"rune cut at tail start", 6, "aaa" + strings.Repeat("b", 20) + "écc", "aaa\n[... 22 bytes truncated ...]\ncc", true},
		{"whole rune in tail", 6, "aaa" + strings.Repeat("b", 20) + "éc", "aaa\n[... 20 bytes truncated ...]\néc", true},
		{"invalid bytes replaced", 10, "a\xffb", "a\uFFFDb", false},
		{"empty", 10, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Written in one piece and byte by byte: same result.
			whole := NewHeadTail(tc.max)
			_, _ = whole.Write([]byte(tc.input))
			bytewise := NewHeadTail(tc.max)
			for i := range len(tc.input) {
				_, _ = bytewise.Write([]byte{tc.input[i]})
			}
			for _, b := range []*HeadTail{whole, bytewise} {
				got, truncated := b.Text()
				require.Equal(t, tc.want, got)
				require.Equal(t, tc.truncated, truncated)
				require.LessOrEqual(t, len(b.head)+len(b.ring), tc.max, "never holds more than max")
			}
		})
	}
}
