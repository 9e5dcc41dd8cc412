package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// derivedIDByFmt is derivedID as it was written first: every part printed
// with fmt's %v. The ids of journals written before must stay derivable.
func derivedIDByFmt(prefix string, parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return prefix + hex.EncodeToString(h.Sum(nil))[:32]
}

// TestDerivedIDAsPrintedByFmt: the parts written without fmt hash to the
// same id as fmt's %v gives, for every kind of part the engine passes and
// for the long, negative, empty and non-ASCII ones.
func TestDerivedIDAsPrintedByFmt(t *testing.T) {
	long := strings.Repeat("ses_01jabcdefghjkmnpqrstvwxyz", 12) // past the stack buffer
	cases := [][]any{
		{},
		{""},
		{"ses_01j", "turn_01j", 3, 0},
		{"ses_01j", "turn_01j", 0, 12, "approval"},
		{"ses_01j", "model", 1 << 20, -7},
		{"ses_01j", "turn_01j", "monitor", int64(123456789012), 4},
		{"ses_01j", "turn_01j", int64(-1), int64(math.MinInt64), math.MaxInt},
		{"ses_01j", "turn_01j", 2, "budget", "cost_usd", 1.5, 7, 9},
		{"ses_01j", "turn_01j", 2, "budget", "tokens", 0.1 + 0.2, 1e21, float32(2.5)},
		{"ses_01j", true, false, uint(7), int32(-3), nil},
		{"ses_\x00x", "é€\xff", long, long},
	}
	for _, parts := range cases {
		for _, prefix := range []string{"", "act_", "eff_", "lhk_", "tres_"} {
			require.Equal(t, derivedIDByFmt(prefix, parts...), derivedID(prefix, parts...), "prefix %q, parts %#v", prefix, parts)
		}
	}
}
