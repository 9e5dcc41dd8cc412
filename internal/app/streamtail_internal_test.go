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

// newTestFeed is a feed with no watch, for its tail alone.
func newTestFeed() *feed {
	f := &feed{keepEvents: tailKeep}
	f.view.Store(&feedView{changed: make(chan struct{})})
	return f
}

// TestSessionTailKeeps: the tail joins pages that continue it, starts over
// from a page newer than it, ignores an older page and a page with a gap,
// serves only what reaches the seq wanted, and stays within its bounds in
// events and bytes; keeping events wakes no stream, announcing does.
func TestSessionTailKeeps(t *testing.T) {
	t.Parallel()
	f := newTestFeed()
	events := func() []lt.Event { return f.view.Load().events }
	woken := f.view.Load().changed
	f.keep(tailEvents(1, 10, 1))
	f.keep(tailEvents(8, 20, 1)) // overlaps: joined
	require.Len(t, events(), 20)
	f.keep(tailEvents(12, 15, 1)) // an older read: held already
	require.Len(t, events(), 20)
	v := f.view.Load()
	require.Equal(t, tailEvents(6, 20, 1), v.covering(5, 20))
	require.Nil(t, v.covering(5, 21), "the tail does not reach seq 21: the store is read")
	require.Nil(t, v.covering(20, 21))
	require.Nil(t, v.covering(5, 5), "nothing wanted (a first read, a poll): the store is read")
	select {
	case <-woken:
		t.Fatal("keeping events read woke the streams")
	default:
	}

	f.keep([]lt.Event{{Seq: 30}, {Seq: 32}}) // a gap: not kept
	require.Len(t, events(), 20)
	f.keep(tailEvents(30, 31, 1)) // newer, past a gap: starts over
	require.Equal(t, int64(30), events()[0].Seq)
	require.Nil(t, f.view.Load().covering(5, 20), "what the tail no longer holds is read from the store")
	f.keep(tailEvents(1, 10, 1)) // a stream far behind: the tail stays on the newest
	require.Equal(t, tailEvents(30, 31, 1), events())

	f.keep(tailEvents(32, 32+2*tailKeep, 1))
	require.Len(t, events(), tailKeep)
	require.Equal(t, int64(32+2*tailKeep), events()[len(events())-1].Seq, "the newest are kept")

	big := 1 << 20
	f.keep(tailEvents(33+2*tailKeep, 40+2*tailKeep, big))
	size := 0
	for _, ev := range events() {
		size += len(ev.Data)
	}
	require.LessOrEqual(t, size, tailKeepBytes)
	require.Equal(t, int64(40+2*tailKeep), events()[len(events())-1].Seq)
	f.keep(tailEvents(41+2*tailKeep, 41+2*tailKeep, 2*tailKeepBytes))
	require.Len(t, events(), 1, "one event larger than the bound is kept alone")

	f.publish(func(v *feedView) { v.announced = 41 + 2*tailKeep })
	select {
	case <-woken:
	default:
		t.Fatal("announcing a seq did not wake the streams")
	}
	require.Equal(t, int64(41+2*tailKeep), f.view.Load().announced)
}
