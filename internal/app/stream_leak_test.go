package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests here end tree streams the ways a consumer or the engine can
// while the stream's watches run; TestMain's goleak check fails the
// package if a watch's forwarder outlives its stream.

// TestStreamTreeEventsConsumerStops: a consumer that breaks out of the
// loop mid-stream (the stream is in its yield) ends the stream and every
// forwarder of its watches.
func TestStreamTreeEventsConsumerStops(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	root := f.create(spawnerSpec(leafSpec, leafSpec), "delegate").ID
	f.waitIdle(root)
	require.Len(t, f.spawnedChildren(root), 2)

	n := 0
	for ev, err := range f.app.StreamTreeEvents(f.ctx, root, "") {
		require.NoError(t, err)
		require.NotEmpty(t, ev.Cursor)
		if n++; n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)
}

// TestStreamTreeEventsEngineStops: an engine stopping under a tree stream
// neither panics it nor leaks: the engine's watches stay open (the stream
// goes on reading the store), and the stream, its watches and their
// forwarders end when the consumer's ctx does.
func TestStreamTreeEventsEngineStops(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	root := f.create(spawnerSpec(leafSpec), "delegate").ID
	f.waitIdle(root)
	total := len(f.journal(root))
	for _, kid := range f.spawnedChildren(root) {
		total += len(f.journal(kid))
	}

	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	ended := make(chan []error, 1)
	caughtUp := make(chan struct{})
	go func() {
		var errs []error
		n := 0
		for _, err := range f.app.StreamTreeEvents(ctx, root, "") {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if n++; n == total {
				close(caughtUp) // the stream now waits on its watches
			}
		}
		ended <- errs
	}()
	select {
	case <-caughtUp:
	case <-time.After(15 * time.Second):
		t.Fatal("the stream did not catch up within 15 s")
	}
	stopCtx, stop := context.WithTimeout(context.WithoutCancel(f.ctx), 10*time.Second)
	defer stop()
	require.NoError(t, f.eng.Stop(stopCtx))
	cancel()
	select {
	case errs := <-ended:
		require.Empty(t, errs, "a stream whose ctx ends stops without an error")
	case <-time.After(15 * time.Second):
		t.Fatal("the stream did not end within 15 s of its ctx ending")
	}
}
