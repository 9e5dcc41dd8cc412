package app

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWithOpenedOnce: the opened callback runs once however often a stream
// reports it, so one that closes a channel cannot panic.
func TestWithOpenedOnce(t *testing.T) {
	t.Parallel()
	opened := make(chan struct{})
	calls := 0
	ctx := WithOpened(t.Context(), func() {
		calls++
		close(opened)
	})
	markOpened(ctx)
	markOpened(ctx)
	require.Equal(t, 1, calls)
	<-opened

	markOpened(context.Background()) // no callback: nothing to call
}
