package journal

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChangesKeepsLastValueInFirstTouchedOrder checks the rows a batch
// touched below and beyond the size at which they are indexed by key: each
// row once, with its last value, in the order first touched.
func TestChangesKeepsLastValueInFirstTouchedOrder(t *testing.T) {
	for _, n := range []int{1, 3, changesIndexAt - 1, changesIndexAt, 3 * changesIndexAt} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var ch Changes
			for round := range 3 {
				for i := range n {
					// The same id under two kinds is two rows.
					ch.put(Doc{Kind: DocTurn, ID: fmt.Sprint("r", i), Status: fmt.Sprint(round)})
					ch.put(Doc{Kind: DocEffect, ID: fmt.Sprint("r", i), Status: fmt.Sprint(round)})
				}
			}
			docs := ch.Docs()
			require.Len(t, docs, 2*n)
			for i := range n {
				require.Equal(t, Doc{Kind: DocTurn, ID: fmt.Sprint("r", i), Status: "2"}, docs[2*i])
				require.Equal(t, Doc{Kind: DocEffect, ID: fmt.Sprint("r", i), Status: "2"}, docs[2*i+1])
				d, ok := ch.doc(DocEffect, fmt.Sprint("r", i))
				require.True(t, ok)
				require.Equal(t, "2", d.Status)
			}
			_, ok := ch.doc(DocAction, "r0")
			require.False(t, ok)
			// Docs is a copy: the caller may keep it while the batch grows.
			docs[0].Status = "changed"
			require.Equal(t, "2", ch.Docs()[0].Status)
		})
	}
	var none *Changes
	none.put(Doc{Kind: DocTurn, ID: "x"}) // a nil Changes records nothing
}
