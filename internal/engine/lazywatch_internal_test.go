package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lazyRecorder records what a lazyWatch did: the watcher's starts (with
// polled) and the subscription's drops.
type lazyRecorder struct {
	mu      sync.Mutex
	started []bool
	stopped int
	ran     chan struct{}
}

func newLazyWatch(rec *lazyRecorder) *lazyWatch {
	rec.ran = make(chan struct{}, 8)
	w := &lazyWatch{}
	w.run = func(polled bool) {
		rec.mu.Lock()
		rec.started = append(rec.started, polled)
		rec.mu.Unlock()
		rec.ran <- struct{}{}
	}
	w.stop = func() {
		rec.mu.Lock()
		rec.stopped++
		rec.mu.Unlock()
	}
	return w
}

func (rec *lazyRecorder) state() ([]bool, int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]bool(nil), rec.started...), rec.stopped
}

// TestLazyWatchStartsOnlyWhenNeeded: a call's watcher starts at once when
// the call must read the session, when an announce came while it was set
// up or comes later, or at the first poll; at most once; and a call that
// ends first starts none and drops its subscription.
func TestLazyWatchStartsOnlyWhenNeeded(t *testing.T) {
	const hour = time.Hour
	t.Run("ends first", func(t *testing.T) {
		var rec lazyRecorder
		w := newLazyWatch(&rec)
		w.arm(false, hour)
		w.end()
		w.announced() // after the call: nothing
		started, stopped := rec.state()
		require.Empty(t, started)
		require.Equal(t, 1, stopped)
	})
	t.Run("read now", func(t *testing.T) {
		var rec lazyRecorder
		w := newLazyWatch(&rec)
		w.arm(true, hour)
		w.announced()
		w.end()
		started, stopped := rec.state()
		require.Equal(t, []bool{false}, started)
		require.Zero(t, stopped, "the started watcher drops its subscription itself")
	})
	t.Run("announced while set up", func(t *testing.T) {
		var rec lazyRecorder
		w := newLazyWatch(&rec)
		w.announced()
		started, _ := rec.state()
		require.Empty(t, started, "not before it is armed")
		w.arm(false, hour)
		w.end()
		started, stopped := rec.state()
		require.Equal(t, []bool{false}, started)
		require.Zero(t, stopped)
	})
	t.Run("announced later", func(t *testing.T) {
		var rec lazyRecorder
		w := newLazyWatch(&rec)
		w.arm(false, hour)
		w.announced()
		w.announced()
		w.end()
		started, stopped := rec.state()
		require.Equal(t, []bool{false}, started)
		require.Zero(t, stopped)
	})
	t.Run("first poll", func(t *testing.T) {
		var rec lazyRecorder
		w := newLazyWatch(&rec)
		w.arm(false, time.Millisecond)
		select {
		case <-rec.ran:
		case <-time.After(time.Minute):
			t.Fatal("the poll did not start the watcher")
		}
		w.announced()
		w.end()
		started, stopped := rec.state()
		require.Equal(t, []bool{true}, started)
		require.Zero(t, stopped)
	})
	t.Run("announce racing the arm", func(t *testing.T) {
		for range 200 {
			var rec lazyRecorder
			w := newLazyWatch(&rec)
			done := make(chan struct{})
			go func() {
				defer close(done)
				w.announced()
			}()
			w.arm(false, hour)
			<-done
			w.end()
			started, stopped := rec.state()
			require.Equal(t, []bool{false}, started, "the announce is never missed")
			require.Zero(t, stopped)
		}
	})
}
