package storeutil

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestGrouperLoneItemHandledByItsCaller: an item that finds a slot free is
// handled before Add returns, as a group of its own.
func TestGrouperLoneItemHandledByItsCaller(t *testing.T) {
	var groups [][]int
	g := NewGrouper(1, 8, func(group []int) { groups = append(groups, append([]int(nil), group...)) })
	for i := range 3 {
		require.NoError(t, g.Add(i))
		require.Len(t, groups, i+1, "item %d not handled when Add returned", i)
	}
	require.Equal(t, [][]int{{0}, {1}, {2}}, groups)
	g.Stop()
}

// TestGrouperGroupsWhatQueuedWhileBusy: items added while every slot is busy
// wait, their Add returning at once, and are handled together (at most max
// at a time) once a slot frees; Stop waits for them.
func TestGrouperGroupsWhatQueuedWhileBusy(t *testing.T) {
	var mu sync.Mutex
	var groups [][]int
	entered, release := make(chan struct{}), make(chan struct{})
	g := NewGrouper(1, 3, func(group []int) {
		if group[0] == 0 {
			close(entered)
			<-release
		}
		mu.Lock()
		groups = append(groups, append([]int(nil), group...))
		mu.Unlock()
	})
	first := make(chan error, 1)
	go func() { first <- g.Add(0) }()
	<-entered
	for i := 1; i <= 5; i++ {
		require.NoError(t, g.Add(i), "an item queued behind a busy slot")
	}
	require.Equal(t, 5, g.Queued())
	close(release)
	require.NoError(t, <-first)
	g.Stop() // waits for the queued items
	require.Equal(t, [][]int{{0}, {1, 2, 3}, {4, 5}}, groups)
	require.Zero(t, g.Queued())
	require.ErrorIs(t, g.Add(6), store.ErrClosed)
}

// TestGrouperSlots: with two slots, two groups are handled at once, and an
// item that finds both busy waits for one.
func TestGrouperSlots(t *testing.T) {
	entered := make(chan int, 2)
	release := make(chan struct{})
	var mu sync.Mutex
	var handled []int
	g := NewGrouper(2, 8, func(group []int) {
		if group[0] < 2 {
			entered <- group[0]
			<-release
		}
		mu.Lock()
		handled = append(handled, group...)
		mu.Unlock()
	})
	errs := make(chan error, 2)
	for i := range 2 {
		// One after the other: two items added at once may be one
		// group, which leaves the second slot idle (a run hung so).
		go func() { errs <- g.Add(i) }()
		require.Equal(t, i, <-entered, "handled in a slot of its own while the other is busy")
	}
	require.Equal(t, 2, g.Workers())
	require.NoError(t, g.Add(2))
	require.Equal(t, 1, g.Queued(), "an item that found both slots busy")
	close(release)
	for range 2 {
		require.NoError(t, <-errs)
	}
	g.Stop()
	require.ElementsMatch(t, []int{0, 1, 2}, handled)
}
