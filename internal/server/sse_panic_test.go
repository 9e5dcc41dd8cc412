package server_test

import (
	"context"
	"io"
	"iter"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// panickyStreams is the real backend whose event streams panic: before
// they open (given after 99), or after their first event.
type panickyStreams struct{ server.Backend }

func (p panickyStreams) StreamEvents(ctx context.Context, id string, after int64) iter.Seq2[lt.Event, error] {
	return func(yield func(lt.Event, error) bool) {
		if after == 99 {
			panic("stream bug before open")
		}
		for ev, err := range p.Backend.StreamEvents(ctx, id, after) {
			yield(ev, err)
			panic("stream bug after an event")
		}
	}
}

// TestStreamPanic: a panic in a Backend's stream ends that stream (a 500 before it opened), is
// logged with its stack, and leaves the server running.
func TestStreamPanic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{wrap: func(b server.Backend) server.Backend { return panickyStreams{b} }})
	sess := h.createSession("hi")

	s := h.openStream(sess.ID, "", nil)
	defer s.close()
	require.Equal(t, "1", s.nextEvent().id)
	for {
		f, err := s.next()
		if err == io.EOF {
			break // the server ended the stream
		}
		require.NoError(t, err)
		require.NotEmpty(t, f.comment, "no event after the panic")
	}
	require.Contains(t, h.logs.String(), "stream bug after an event")
	require.Contains(t, h.logs.String(), "goroutine", "the stack is logged")

	r := h.get("/v1/sessions/" + sess.ID + "/events/stream?after=99")
	e := requireError(t, r, http.StatusInternalServerError, "internal", "")
	require.Equal(t, "internal error", e.Message)
	require.Contains(t, h.logs.String(), "stream bug before open")

	// The server kept running.
	require.Equal(t, http.StatusOK, h.get("/v1/sessions/"+sess.ID).status)
}
