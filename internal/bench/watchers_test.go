package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLineSplitter: lines cut across reads come whole; a line longer than
// what is kept may be skipped (when a read cuts it), and the lines after it
// are not.
func TestLineSplitter(t *testing.T) {
	long := "data: " + strings.Repeat("x", 2*watchersLineKeep)
	stream := "id: 1\nevent: a\n" + long + "\n\nid: 22\n" + long + "\nid: 333\n\n"
	want := []string{"id: 1", "event: a", "", "id: 22", "id: 333", ""}
	for _, size := range []int{1, 2, 3, 7, 64, len(stream)} {
		var l lineSplitter
		var got []string
		for p := stream; len(p) > 0; {
			n := min(size, len(p))
			l.split([]byte(p[:n]), func(line []byte) bool {
				if !strings.HasPrefix(string(line), "data: ") {
					got = append(got, string(line))
				}
				return true
			})
			p = p[n:]
		}
		require.Equal(t, want, got, "reads of %d bytes", size)
	}
}
