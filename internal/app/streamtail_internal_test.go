package app

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func tailEvents(from, to int64, size int) []lt.Event {
	var evs []lt.Event
	for seq := from; seq <= to; seq++ {
		evs = append(evs, lt.Event{Seq: seq, Data: []byte(strings.Repeat("x", size))})
	}
	return evs
}

// TestSessionTailKeeps: the tail joins pages that continue it, starts over
// from a page that does not, refuses a page with a gap, serves only what
// reaches the seq wanted, and stays within its bounds in events and bytes.
func TestSessionTailKeeps(t *testing.T) {
	t.Parallel()
	var st sessionTail
	st.keep(tailEvents(1, 10, 1))
	st.keep(tailEvents(8, 20, 1)) // overlaps: joined
	require.Len(t, st.events, 20)
	st.keep(tailEvents(12, 15, 1)) // an older read: held already
	require.Len(t, st.events, 20)
	require.Equal(t, tailEvents(6, 20, 1), st.covering(5, 20))
	require.Nil(t, st.covering(5, 21), "the tail does not reach seq 21: the store is read")
	require.Nil(t, st.covering(20, 21))

	st.keep([]lt.Event{{Seq: 30}, {Seq: 32}}) // a gap: not kept
	require.Len(t, st.events, 20)
	st.keep(tailEvents(30, 31, 1)) // does not continue it: starts over
	require.Equal(t, int64(30), st.events[0].Seq)
	require.Nil(t, st.covering(5, 20), "what the tail no longer holds is read from the store")

	st.keep(tailEvents(32, 32+2*tailKeep, 1))
	require.Len(t, st.events, tailKeep)
	require.Equal(t, int64(32+2*tailKeep), st.events[len(st.events)-1].Seq, "the newest are kept")

	big := 1 << 20
	st.keep(tailEvents(33+2*tailKeep, 40+2*tailKeep, big))
	size := 0
	for _, ev := range st.events {
		size += len(ev.Data)
	}
	require.LessOrEqual(t, size, tailKeepBytes)
	require.Equal(t, int64(40+2*tailKeep), st.events[len(st.events)-1].Seq)
	st.keep(tailEvents(41+2*tailKeep, 41+2*tailKeep, 2*tailKeepBytes))
	require.Len(t, st.events, 1, "one event larger than the bound is kept alone")
}
