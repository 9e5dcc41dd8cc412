package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// readUntil reads events until seq last, requiring each seq to follow the
// previous one (no gap, no repeat) starting after from.
func readUntil(t *testing.T, s *sseStream, from, last int64) []sseFrame {
	t.Helper()
	var frames []sseFrame
	for want := from + 1; want <= last; want++ {
		f := s.nextEvent()
		require.Equal(t, strconv.FormatInt(want, 10), f.id, "events arrive in seq order, each once")
		frames = append(frames, f)
	}
	return frames
}

// requireJournal checks that frames are exactly the journal: one frame per
// event from seq 1, with the list endpoint's bytes for each event.
func requireJournal(t *testing.T, frames []sseFrame, journal []json.RawMessage) {
	t.Helper()
	require.Len(t, frames, len(journal))
	for i, f := range frames {
		var ev lt.Event
		require.NoError(t, json.Unmarshal(journal[i], &ev))
		require.EqualValues(t, i+1, ev.Seq)
		require.Equal(t, strconv.FormatInt(ev.Seq, 10), f.id)
		require.Equal(t, ev.Type, f.event)
		require.Equal(t, string(journal[i]), f.data, "seq %d: the stream sends the journal's bytes", ev.Seq)
	}
}

func TestStreamDeliversTheJournalAndResumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sess := h.createSession("stream me")

	// Read a few events while the session runs, then drop the connection.
	first := h.openStream(sess.ID, "", nil)
	frames := readUntil(t, first, 0, 3)
	first.close()

	done := h.waitStatus(sess.ID, lt.SessionIdle)
	journal := h.allEvents(sess.ID, 500)
	n := int64(len(journal))
	require.Equal(t, done.LastEventSeq, n)
	require.Greater(t, n, int64(3))

	// Resume where the client left off: the rest, nothing twice.
	resumed := h.openStream(sess.ID, "?after=1", map[string]string{"Last-Event-ID": "3"})
	frames = append(frames, readUntil(t, resumed, 3, n)...)
	requireJournal(t, frames, journal)

	// The stream stays open across turns: a follow-up turn's events arrive
	// on it live.
	r := h.post("/v1/sessions/"+sess.ID+"/turns", `{"input":"again"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	h.waitStatus(sess.ID, lt.SessionIdle)
	journal = h.allEvents(sess.ID, 500)
	frames = append(frames, readUntil(t, resumed, n, int64(len(journal)))...)
	requireJournal(t, frames, journal)

	// ?after= starts the stream when there is no Last-Event-ID.
	tail := h.openStream(sess.ID, "?after="+strconv.Itoa(len(journal)-2), nil)
	last2 := readUntil(t, tail, int64(len(journal)-2), int64(len(journal)))
	require.Equal(t, string(journal[len(journal)-1]), last2[1].data)
}

func TestStreamPingsAndShutdown(t *testing.T) {
	t.Parallel()
	ticks := make(chan time.Time)
	stopped := make(chan struct{}, 8)
	h := newHarness(t, harnessOpts{
		cfg: &server.Config{PingInterval: 42 * time.Second},
		ticker: func(d time.Duration) (<-chan time.Time, func()) {
			if d != 42*time.Second {
				panic("ping ticker made with " + d.String())
			}
			return ticks, func() { stopped <- struct{}{} }
		},
	})
	sess := h.createSession("ping")
	h.waitStatus(sess.ID, lt.SessionIdle)
	n := len(h.allEvents(sess.ID, 500))

	s := h.openStream(sess.ID, "", map[string]string{"Last-Event-ID": strconv.Itoa(n)})
	ticks <- time.Time{} // the stream is caught up and waiting: it pings
	f, err := s.next()
	require.NoError(t, err)
	require.Equal(t, "ping", f.comment)
	require.Empty(t, f.id)

	// Shutdown ends open streams (so http.Server.Shutdown is not held) and
	// refuses new ones; /readyz reports draining.
	h.srv.Shutdown()
	for {
		f, err := s.next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Equal(t, "ping", f.comment, "only pings may precede the end")
	}
	<-stopped // the stream stopped its ticker on the way out
	requireError(t, h.get("/v1/sessions/"+sess.ID+"/events/stream"), http.StatusServiceUnavailable, "unavailable", "")
	requireError(t, h.get("/readyz"), http.StatusServiceUnavailable, "unavailable", "")
	// Other endpoints keep serving while http.Server drains.
	require.Equal(t, http.StatusOK, h.get("/v1/sessions/"+sess.ID).status)
}

func TestStreamErrorsBeforeStreaming(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	requireError(t, h.get("/v1/sessions/ses_missing/events/stream"), http.StatusNotFound, "not_found", "")
	sess := h.createSession("errors")
	requireError(t, h.do(http.MethodGet, "/v1/sessions/"+sess.ID+"/events/stream", nil, map[string]string{"Last-Event-ID": "x"}),
		http.StatusBadRequest, "invalid_request", "Last-Event-ID")
	requireError(t, h.do(http.MethodGet, "/v1/sessions/"+sess.ID+"/events/stream", nil, map[string]string{"Last-Event-ID": "-4"}),
		http.StatusBadRequest, "invalid_request", "Last-Event-ID")
	requireError(t, h.get("/v1/sessions/"+sess.ID+"/events/stream?after=soon"), http.StatusBadRequest, "invalid_request", "after")

	// HEAD answers with the stream's headers and ends.
	head := h.do(http.MethodHead, "/v1/sessions/"+sess.ID+"/events/stream", nil, nil)
	require.Equal(t, http.StatusOK, head.status)
	require.Equal(t, "text/event-stream", head.header.Get("Content-Type"))
	require.Empty(t, head.body)
}

// TestManyStreamsOfOneSessionAndAResumeMidStream: many clients follow one
// session over HTTP at once (its events fanned out from one shared feed,
// each event's frame encoded once): every one gets every event, in order,
// once, with the journal's bytes, live across turns; one that drops its
// connection mid-stream resumes with Last-Event-ID from the last id it
// read, while the session runs on, and misses nothing.
func TestManyStreamsOfOneSessionAndAResumeMidStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sess := h.createSession("stream me to many")
	const clients = 20
	streams := make([]*sseStream, clients)
	for i := range streams {
		streams[i] = h.openStream(sess.ID, "", nil)
	}
	frames := make([][]sseFrame, clients)

	// The last client reads a few events, then drops its connection.
	dropper := clients - 1
	frames[dropper] = readUntil(t, streams[dropper], 0, 3)
	streams[dropper].close()

	done := h.waitStatus(sess.ID, lt.SessionIdle)
	journal := h.allEvents(sess.ID, 500)
	n := int64(len(journal))
	require.Equal(t, done.LastEventSeq, n)

	// It comes back with the id of the last frame it read, and a follow-up
	// turn starts before it reads on.
	streams[dropper] = h.openStream(sess.ID, "", map[string]string{"Last-Event-ID": frames[dropper][2].id})
	r := h.post("/v1/sessions/"+sess.ID+"/turns", `{"input":"again"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	h.waitStatus(sess.ID, lt.SessionIdle)
	journal = h.allEvents(sess.ID, 500)
	require.Greater(t, int64(len(journal)), n)
	for i, s := range streams {
		frames[i] = append(frames[i], readUntil(t, s, int64(len(frames[i])), int64(len(journal)))...)
		requireJournal(t, frames[i], journal)
	}
}
