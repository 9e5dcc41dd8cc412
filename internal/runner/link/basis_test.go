package link_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// TestCheckBasis: an if_basis is "absent" or "sha256:" and 64 lowercase
// hex digits (or none); anything else is refused naming the field.
func TestCheckBasis(t *testing.T) {
	for _, ok := range []string{"", link.BasisAbsent, "sha256:" + strings.Repeat("ab", 32)} {
		require.NoError(t, link.CheckBasis("if_basis", ok), ok)
	}
	for _, bad := range []string{"Absent", "sha256:", "sha256:" + strings.Repeat("AB", 32), strings.Repeat("ab", 32), "sha1:" + strings.Repeat("a", 40), "dir"} {
		require.ErrorContains(t, link.CheckBasis("if_basis", bad), "if_basis", bad)
	}
}
