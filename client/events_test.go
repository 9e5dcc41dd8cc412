package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestStreamEventsYieldsInOrder(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 5)
	srv := startServer(t, j.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	got := collect(t, t.Context(), c, "ses_1", 0, 5)
	require.Equal(t, seqRange(1, 5), seqs(got))
	require.Equal(t, lt.EventToolCompleted, got[0].Type)
	require.JSONEq(t, `{"n":1,"text":"line one\nline two"}`, string(got[0].Data))

	// Starting after a seq skips what came before it.
	got = collect(t, t.Context(), c, "ses_1", 3, 2)
	require.Equal(t, []int64{4, 5}, seqs(got))
	require.Equal(t, "3", j.connInfos()[1].lastEventID)
	require.Equal(t, "3", j.connInfos()[1].after)
}

func TestStreamEventsFollowsLiveAppends(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 1)
	srv := startServer(t, j.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	var got []lt.Event
	for ev, err := range c.StreamEvents(t.Context(), "ses_1", 0) {
		require.NoError(t, err)
		got = append(got, ev)
		if ev.Seq == 4 {
			break
		}
		j.append(1) // the journal grows while the stream is open
	}
	require.Equal(t, seqRange(1, 4), seqs(got))
	require.Len(t, j.connInfos(), 1, "one connection carries the live events")
}

func TestStreamEventsResumesAfterCutMidEvent(t *testing.T) {
	t.Parallel()
	for _, abort := range []bool{false, true} {
		t.Run(fmt.Sprintf("abort=%v", abort), func(t *testing.T) {
			t.Parallel()
			j := newFakeJournal("ses_1", 6)
			j.plan = func(conn int) streamPlan {
				if conn == 0 {
					// Events 1 and 2, then half of 3.
					return streamPlan{cutAfter: 2, abort: abort}
				}
				// The resumed connection replays from 1 and uses
				// CRLF and multi-line data.
				return streamPlan{replayFrom: 1, crlf: true, pretty: true}
			}
			srv := startServer(t, j.handler())
			c, sl := newTestClient(t, srv.URL, nil)

			got := collect(t, t.Context(), c, "ses_1", 0, 6)
			require.Equal(t, seqRange(1, 6), seqs(got), "no gap, no duplicate")
			conns := j.connInfos()
			require.Len(t, conns, 2)
			require.Equal(t, "2", conns[1].lastEventID, "resumes after the last event yielded")
			require.Empty(t, sl.all(), "a healthy connection is resumed without backoff")
		})
	}
}

func TestStreamEventsContinuesAcrossServerRestart(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 3)
	srv := startServerAt(t, j.handler(), "127.0.0.1:0")
	addr := srv.Listener.Addr().String()

	restarts := 0
	c, err := New(srv.URL, &Config{
		HTTPClient: ownTransport(t),
		// The first backoff sleep comes after a reconnect found nothing
		// listening: bring the server back then, with a grown journal.
		Sleep: func(ctx context.Context, d time.Duration) error {
			if restarts == 0 {
				restarts++
				startServerAt(t, j.handler(), addr)
				j.append(3)
			}
			return ctx.Err()
		},
	})
	require.NoError(t, err)

	var got []lt.Event
	for ev, err := range c.StreamEvents(t.Context(), "ses_1", 0) {
		require.NoError(t, err)
		got = append(got, ev)
		if ev.Seq == 3 {
			srv.CloseClientConnections()
			srv.Close()
		}
		if ev.Seq == 6 {
			break
		}
	}
	require.Equal(t, seqRange(1, 6), seqs(got))
	require.Equal(t, 1, restarts)
	conns := j.connInfos()
	require.Len(t, conns, 2)
	require.Equal(t, "3", conns[1].lastEventID)
}

func TestStreamEventsBackfillsGap(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 7)
	j.plan = func(int) streamPlan { return streamPlan{skip: map[int64]bool{3: true, 4: true, 6: true}} }
	srv := startServer(t, j.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	got := collect(t, t.Context(), c, "ses_1", 0, 7)
	require.Equal(t, seqRange(1, 7), seqs(got))
	require.Equal(t, []int64{2, 5}, j.listCalls(), "each gap is filled from the list endpoint")
	require.Len(t, j.connInfos(), 1)
	require.JSONEq(t, `{"n":3,"text":"line one\nline two"}`, string(got[2].Data))
}

func TestStreamEventsNotFoundEnds(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 1)
	srv := startServer(t, j.handler())
	c, sl := newTestClient(t, srv.URL, nil)

	var errs []error
	for ev, err := range c.StreamEvents(t.Context(), "ses_missing", 0) {
		require.Zero(t, ev.Seq)
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.True(t, IsNotFound(errs[0]), "%v", errs[0])
	require.ErrorContains(t, errs[0], "session ses_missing not found")
	require.Len(t, j.connInfos(), 1, "a 404 is not retried")
	require.Empty(t, sl.all())
}

func TestStreamEventsTerminalStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusBadRequest} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			j := newFakeJournal("ses_1", 1)
			j.plan = func(int) streamPlan { return streamPlan{status: status} }
			srv := startServer(t, j.handler())
			c, _ := newTestClient(t, srv.URL, nil)

			var errs []error
			for _, err := range c.StreamEvents(t.Context(), "ses_1", 0) {
				errs = append(errs, err)
			}
			require.Len(t, errs, 1)
			var ae *APIError
			require.ErrorAs(t, errs[0], &ae)
			require.Equal(t, status, ae.Status)
			require.Len(t, j.connInfos(), 1)
		})
	}
}

func TestStreamEventsRetriesTransientStatus(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 2)
	j.plan = func(conn int) streamPlan {
		switch conn {
		case 0:
			return streamPlan{status: http.StatusServiceUnavailable}
		case 1:
			return streamPlan{status: http.StatusBadGateway}
		}
		return streamPlan{}
	}
	srv := startServer(t, j.handler())
	c, sl := newTestClient(t, srv.URL, &Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})

	got := collect(t, t.Context(), c, "ses_1", 0, 2)
	require.Equal(t, seqRange(1, 2), seqs(got))
	ds := sl.all()
	require.Len(t, ds, 2)
	require.GreaterOrEqual(t, ds[0], 50*time.Millisecond)
	require.LessOrEqual(t, ds[0], 100*time.Millisecond)
	require.GreaterOrEqual(t, ds[1], 100*time.Millisecond)
	require.LessOrEqual(t, ds[1], 200*time.Millisecond)
}

func TestStreamEventsReconnectsWhenIdle(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 3)
	j.plan = func(conn int) streamPlan {
		if conn == 0 {
			return streamPlan{limit: 1} // event 1, then silence
		}
		return streamPlan{}
	}
	srv := startServer(t, j.handler())
	clock := newManualClock()
	c, _ := newTestClient(t, srv.URL, &Config{Now: clock.Now, After: clock.After})

	done := make(chan struct{})
	defer close(done)
	var got []lt.Event
	for ev, err := range c.StreamEvents(t.Context(), "ses_1", 0) {
		require.NoError(t, err)
		got = append(got, ev)
		if ev.Seq == 1 {
			// Time passes with no byte on the wire; advance the clock
			// until the watchdog has given up on the connection.
			go func() {
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for len(j.connInfos()) < 2 {
					select {
					case <-done:
						return
					case <-tick.C:
						clock.Advance(DefaultStreamIdleTimeout + time.Second)
					}
				}
			}()
		}
		if ev.Seq == 3 {
			break
		}
	}
	require.Equal(t, seqRange(1, 3), seqs(got))
	conns := j.connInfos()
	require.GreaterOrEqual(t, len(conns), 2)
	require.Equal(t, "1", conns[1].lastEventID)
}

func TestStreamEventsIdleWatchdogIgnoresSlowConsumer(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 3)
	srv := startServer(t, j.handler())
	clock := newManualClock()
	c, _ := newTestClient(t, srv.URL, &Config{Now: clock.Now, After: clock.After})

	var got []lt.Event
	for ev, err := range c.StreamEvents(t.Context(), "ses_1", 0) {
		require.NoError(t, err)
		got = append(got, ev)
		// The consumer takes minutes per event: that is not silence on
		// the wire.
		clock.Advance(10 * time.Minute)
		if ev.Seq == 3 {
			break
		}
	}
	require.Equal(t, seqRange(1, 3), seqs(got))
	require.Len(t, j.connInfos(), 1)
}

func TestStreamEventsEndsWithContext(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 2)
	srv := startServer(t, j.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []lt.Event
	var errs []error
	for ev, err := range c.StreamEvents(ctx, "ses_1", 0) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, ev)
		if ev.Seq == 2 {
			cancel()
		}
	}
	require.Equal(t, seqRange(1, 2), seqs(got))
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], context.Canceled)
	require.Eventually(t, func() bool { return j.openStreams() == 0 }, 5*time.Second, time.Millisecond)
}

func TestStreamEventsBreakClosesConnection(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 3)
	srv := startServer(t, j.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	got := collect(t, t.Context(), c, "ses_1", 0, 1)
	require.Equal(t, []int64{1}, seqs(got))
	require.Eventually(t, func() bool { return j.openStreams() == 0 }, 5*time.Second, time.Millisecond)
}

func TestStreamEventsBackoffGrowsWhileUnavailable(t *testing.T) {
	t.Parallel()
	// A server that stays unavailable: the delays grow to the cap until
	// ctx ends.
	j := newFakeJournal("ses_1", 1)
	j.plan = func(int) streamPlan { return streamPlan{status: http.StatusServiceUnavailable} }
	srv := startServer(t, j.handler())

	ctx, cancel := context.WithCancel(t.Context())
	var ds []time.Duration
	c, err := New(srv.URL, &Config{
		HTTPClient: ownTransport(t),
		MinBackoff: 100 * time.Millisecond,
		MaxBackoff: 400 * time.Millisecond,
		Sleep: func(ctx context.Context, d time.Duration) error {
			ds = append(ds, d)
			if len(ds) == 6 {
				cancel()
			}
			return ctx.Err()
		},
	})
	require.NoError(t, err)
	var errs []error
	for _, err := range c.StreamEvents(ctx, "ses_1", 0) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], context.Canceled)
	require.Len(t, ds, 6)
	highs := []time.Duration{100, 200, 400, 400, 400, 400}
	for i, d := range ds {
		high := highs[i] * time.Millisecond
		require.GreaterOrEqual(t, d, high/2, "delay %d", i)
		require.LessOrEqual(t, d, high, "delay %d", i)
	}
}

func TestStreamEventsProtocolErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{
			name: "not an event stream",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"data":[]}`))
			},
			wantErr: `Content-Type is "application/json"`,
		},
		{
			name: "data is not an event",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("id: 1\ndata: hello\n\n"))
			},
			wantErr: `decode event (id "1")`,
		},
		{
			name: "event without seq",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: {\"type\":\"x\"}\n\n"))
			},
			wantErr: "has no seq",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, tt.handler)
			c, _ := newTestClient(t, srv.URL, nil)
			var errs []error
			for _, err := range c.StreamEvents(t.Context(), "ses_1", 0) {
				errs = append(errs, err)
			}
			require.Len(t, errs, 1)
			require.ErrorContains(t, errs[0], tt.wantErr)
		})
	}
}

func TestStreamEventsJournalGapIsTerminal(t *testing.T) {
	t.Parallel()
	// The stream skips 2 and the list endpoint lacks it too: the journal
	// broke its gap-free promise, and the consumer is told instead of
	// being handed a hole.
	j := newFakeJournal("ses_1", 3)
	j.plan = func(int) streamPlan { return streamPlan{skip: map[int64]bool{2: true}} }
	mux := http.NewServeMux()
	mux.Handle("GET /v1/sessions/{id}/events/stream", j.handler())
	mux.HandleFunc("GET /v1/sessions/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[{"seq":3,"type":"x"}],"next_cursor":null}`))
	})
	srv := startServer(t, mux)
	c, _ := newTestClient(t, srv.URL, nil)

	var got []int64
	var errs []error
	for ev, err := range c.StreamEvents(t.Context(), "ses_1", 0) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, ev.Seq)
	}
	require.Equal(t, []int64{1}, got)
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], "journal gap: event 3 follows 1")
}

func TestStreamEventsValidatesArguments(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, "http://127.0.0.1:1", nil)
	for _, tt := range []struct {
		id    string
		after int64
		want  string
	}{
		{"", 0, "sessionID is empty"},
		{"ses_1", -1, "after -1 is negative"},
	} {
		var errs []error
		for _, err := range c.StreamEvents(t.Context(), tt.id, tt.after) {
			errs = append(errs, err)
		}
		require.Len(t, errs, 1)
		require.ErrorContains(t, errs[0], tt.want)
	}
}

func TestListEventsPages(t *testing.T) {
	t.Parallel()
	j := newFakeJournal("ses_1", 5)
	srv := startServer(t, j.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	page, err := c.ListEvents(t.Context(), "ses_1", 1, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, seqs(page.Data))
	require.NotNil(t, page.NextCursor)

	page, err = c.ListEvents(t.Context(), "ses_1", 3, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5}, seqs(page.Data))
	require.Nil(t, page.NextCursor)

	_, err = c.ListEvents(t.Context(), "ses_2", 0, 0)
	require.True(t, IsNotFound(err))
	require.True(t, strings.HasPrefix(err.Error(), "list events of ses_2: "), err.Error())
	require.False(t, errors.Is(err, context.Canceled))
}
