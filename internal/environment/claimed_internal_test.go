package environment

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClaimedSnapshotsBounded: the set never holds more than maxClaimed
// snapshots, keeps the one just added, and tells projects apart.
func TestClaimedSnapshotsBounded(t *testing.T) {
	var c claimedSnapshots
	for i := range maxClaimed + 100 {
		id := fmt.Sprintf("snap%d", i)
		c.add("alpha", id)
		require.True(t, c.has("alpha", id))
	}
	require.Len(t, c.ids, maxClaimed)
	c.add("alpha", "snap1") // known or not, never more than the bound
	require.LessOrEqual(t, len(c.ids), maxClaimed)
	require.False(t, c.has("beta", fmt.Sprintf("snap%d", maxClaimed+99)), "claimed for alpha, not beta")
}
