package server

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestFrameCacheEncodesEachEventOnce: the streams of a session share each
// event's frame (encoded once, byte for byte what eventFrame gives),
// events of other sessions or seqs are encoded apart, and the cache keeps
// at most two generations of frames.
func TestFrameCacheEncodesEachEventOnce(t *testing.T) {
	t.Parallel()
	var c frameCache
	encodes := 0
	frameOf := func(ev *lt.Event) []byte {
		t.Helper()
		f, err := c.frame(ev, func() ([]byte, error) {
			encodes++
			return eventFrame(ev, "1")
		})
		require.NoError(t, err)
		return f
	}
	ev := &lt.Event{Seq: 1, Type: lt.EventTurnStarted, SessionID: "sess_a", Data: []byte(`{"x":1}`)}
	want, err := eventFrame(ev, "1")
	require.NoError(t, err)
	for range 100 {
		require.Equal(t, want, frameOf(ev))
	}
	require.Equal(t, 1, encodes, "one encoding for every stream of the session")
	frameOf(&lt.Event{Seq: 1, Type: lt.EventTurnStarted, SessionID: "sess_b"})
	frameOf(&lt.Event{Seq: 2, Type: lt.EventTurnStarted, SessionID: "sess_a"})
	require.Equal(t, 3, encodes)

	for i := range 3 * frameCacheSize {
		frameOf(&lt.Event{Seq: int64(i + 10), SessionID: "sess_c"})
	}
	require.LessOrEqual(t, len(c.cur)+len(c.old), 2*frameCacheSize)
	// Large frames: bounded in bytes too.
	for i := range 40 {
		frameOf(&lt.Event{Seq: int64(i + 1), SessionID: "sess_d", Data: []byte(`"` + strings.Repeat("x", 1<<20) + `"`)})
	}
	held := 0
	for _, gen := range []map[frameKey][]byte{c.cur, c.old} {
		for _, f := range gen {
			held += len(f)
		}
	}
	require.LessOrEqual(t, held, 2*frameCacheBytes)
	before := encodes
	frameOf(ev)
	require.Equal(t, before+1, encodes, "a frame of two generations ago is encoded again")
}

// TestFrameCacheSharedByConcurrentStreams: streams looking up the same
// new events at once (the lock-free slots and the maps behind them) each
// get every event's own frame (with -race: without a data race). How
// often an event is encoded depends on the scheduling (two streams may
// both encode it before either stores it); TestFrameCacheEncodesEachEventOnce
// counts it.
func TestFrameCacheSharedByConcurrentStreams(t *testing.T) {
	t.Parallel()
	var c frameCache
	const streams, events = 50, 2 * frameRecentSlots
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			for seq := int64(1); seq <= events; seq++ {
				ev := &lt.Event{Seq: seq, Type: lt.EventTurnStarted, SessionID: "sess_a"}
				f, err := c.frame(ev, func() ([]byte, error) {
					return eventFrame(ev, strconv.FormatInt(seq, 10))
				})
				if err != nil || !strings.HasPrefix(string(f), "id: "+strconv.FormatInt(seq, 10)+"\n") {
					t.Errorf("seq %d: frame %q, error %v", seq, f, err)
				}
			}
		})
	}
	wg.Wait()
}
