package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkspaceLocks: runners share a session's lock; a person's change
// holds it alone, waits for the runners to let go (or gives up when its
// context ends), and a runner waits for a change in progress; unused locks
// are dropped.
func TestWorkspaceLocks(t *testing.T) {
	t.Parallel()
	var l workspaceLocks
	r1 := l.share("ses_a")
	r2 := l.share("ses_a")
	_, ok := l.tryExclusive("ses_a")
	require.False(t, ok, "runners hold it")
	other, ok := l.tryExclusive("ses_b")
	require.True(t, ok, "another session's lock is its own")
	other()

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan bool, 1)
	go func() {
		_, ok := l.exclusive(ctx, "ses_a")
		got <- ok
	}()
	cancel()
	require.False(t, <-got, "gave up with its context")

	done := make(chan func(), 1)
	go func() {
		unlock, ok := l.exclusive(context.Background(), "ses_a")
		require.True(t, ok)
		done <- unlock
	}()
	r1()
	select {
	case <-done:
		t.Fatal("taken while a runner still held it")
	default:
	}
	l.mu.Lock()
	require.Equal(t, 1, l.m["ses_a"].readers)
	require.False(t, l.m["ses_a"].writer, "never alone while a runner holds it")
	l.mu.Unlock()
	r2()
	unlock := <-done // the last runner let go

	shared := make(chan func(), 1)
	go func() { shared <- l.share("ses_a") }()
	select {
	case <-shared:
		t.Fatal("a runner started during a change")
	default:
	}
	unlock()
	(<-shared)()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.m, "unused locks are dropped")
}
