package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// streamEvents is GET /v1/sessions/{id}/events/stream: the session's journal
// as server-sent events, from the resume point on, one frame per event:
//
//	id: <seq>
//	event: <type>
//	data: <the event as JSON, on one line>
//
// and a ": ping" comment every PingInterval. Backend.StreamEvents follows
// the journal (every seq exactly once and in order, an event appended at
// any moment seen); this handler writes what it yields. It stays open
// across turns and ends only when the client leaves or Shutdown is called
// (the client then resumes with Last-Event-ID).
//
// With ?include=subagents it is streamTree instead: the session's sub-agents'
// events too.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	inc, err := queryInclude(r)
	if err != nil {
		return err
	}
	if inc.subagents {
		return s.streamTree(w, r)
	}
	id := r.PathValue("id")
	after, err := streamStart(r)
	if err != nil {
		return err
	}
	stream := func(ctx context.Context) iter.Seq2[lt.Event, error] { return s.b.StreamEvents(ctx, id, after) }
	return serveStream(s, w, r, stream, func(ev *lt.Event) ([]byte, error) {
		return s.frames.frame(ev, func() ([]byte, error) { return eventFrame(ev, strconv.FormatInt(ev.Seq, 10)) })
	})
}

// serveStream answers r with the event stream that stream yields, each
// value written as frame encodes it, plus a ping every PingInterval.
//
// The stream runs in the request's goroutine, and each of its values is
// appended to a batch that goes out, in one write and one flush, when the
// stream is about to wait for more (app.WithCaughtUp): a burst of events
// is one write, and a thousand streams of one session cost a goroutine
// wake-up each per burst, not two hand-offs per event. Pings come from a
// goroutine of their own, which waits on the ticker; a lock keeps its
// writes apart from the stream's. app.WithOpened tells when the stream has
// checked the request: an error before that is the request's, answered
// with its status (a 404 or a 400), and returned; one after it ends the
// stream (logged). It returns when the client leaves, Shutdown is called
// or the stream ends, and only once the ping goroutine has (so nothing
// writes to w after it).
func serveStream[T any](s *Server, w http.ResponseWriter, r *http.Request, stream func(context.Context) iter.Seq2[T, error], frame func(*T) ([]byte, error)) error {
	if s.base.Err() != nil {
		return apierror.Unavailable("the server is shutting down; reconnect to another server or later")
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stopOnShutdown := context.AfterFunc(s.base, cancel)
	defer stopOnShutdown()

	out := &streamOutput{}
	defer out.release()
	var (
		opened    bool  // the stream checked the request
		streaming bool  // the headers are out and the body follows
		startErr  error // the headers could not be sent
		pings     sync.WaitGroup
	)
	// Deferred last, so run first: the pings end before w is let go.
	defer pings.Wait()
	defer cancel()
	ctx = app.WithOpened(ctx, func() {
		opened = true
		rc, ok, err := s.startStream(w, r)
		if err != nil || !ok {
			startErr = err
			cancel() // a HEAD request, or no flushing: the stream is not read
			return
		}
		streaming = true
		out.sw = s.streamWriter(w, rc)
		tick, stopTick := s.newTicker(s.cfg.PingInterval)
		pings.Add(1)
		go func() {
			defer pings.Done()
			defer stopTick()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick:
					if out.ping() != nil {
						cancel() // the client left: the stream ends at its next wait
						return
					}
				}
			}
		}()
	})
	ctx, batching := app.WithCaughtUp(ctx, func() {
		if out.flush() != nil {
			cancel()
		}
	})

	err := func() (err error) {
		// A panic in the stream ends it, as its error, rather than the
		// connection with nothing said; before the stream opened it is
		// the request's 500.
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("event stream panicked", "method", r.Method, "path", r.URL.Path, "request_id", requestID(r),
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				err = fmt.Errorf("%w: %v", errStreamPanicked, p)
			}
		}()
		// One value for the whole stream: frame takes a pointer, which
		// would move each value yielded to the heap.
		var cur T
		for v, err := range stream(ctx) {
			if err != nil {
				return err
			}
			if !opened {
				return errors.New("event stream: a value came before the stream opened")
			}
			if !streaming {
				return nil
			}
			cur = v
			data, err := frame(&cur)
			if err != nil {
				return err
			}
			// A stream that does not call the caught-up hook gets each
			// value sent at once.
			if err := out.add(data, !batching()); err != nil {
				return err
			}
		}
		return nil
	}()
	if !opened {
		if err == nil {
			return nil // the client left, or Shutdown was called
		}
		return err
	}
	if !streaming {
		return startErr
	}
	// What the stream yielded before it ended goes out first.
	if ferr := out.flush(); ferr != nil && err == nil {
		err = ferr
	}
	switch {
	case err != nil:
		s.endStream(ctx, r, err)
	case ctx.Err() == nil:
		// The stream ended without our ctx ending: the backend is
		// stopping. The client resumes elsewhere or later.
		s.log.Info("event stream: session watch ended; closing the stream", "session_id", r.PathValue("id"))
	}
	return nil
}

// streamOutput is what a stream writes: the batch of frames not yet sent,
// and the writer, shared by the stream's goroutine and its pings'.
type streamOutput struct {
	mu    sync.Mutex
	sw    *streamWriter
	batch *[]byte // from streamBatches while it holds frames
	err   error   // the first failed send: the client is gone
}

// add appends a frame to the batch, and sends the batch when now is true
// or it has grown to streamBatchBytes.
func (o *streamOutput) add(frame []byte, now bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if o.batch == nil {
		o.batch = streamBatches.Get().(*[]byte)
	}
	*o.batch = append(*o.batch, frame...)
	if now || len(*o.batch) >= streamBatchBytes {
		return o.sendLocked()
	}
	return nil
}

// flush sends the batch, if it holds anything.
func (o *streamOutput) flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	return o.sendLocked()
}

// ping sends the ping comment.
func (o *streamOutput) ping() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.err = o.sw.send(ping)
	}
	return o.err
}

// sendLocked sends the batch and gives its buffer back to the pool (a
// stream needs one only while a burst lasts).
func (o *streamOutput) sendLocked() error {
	if o.batch == nil {
		return nil
	}
	if len(*o.batch) > 0 {
		o.err = o.sw.send(*o.batch)
	}
	o.releaseLocked()
	return o.err
}

// release gives the batch's buffer back, once the stream is over.
func (o *streamOutput) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.releaseLocked()
}

func (o *streamOutput) releaseLocked() {
	if o.batch != nil {
		*o.batch = (*o.batch)[:0]
		streamBatches.Put(o.batch)
		o.batch = nil
	}
}

// streamBatchBytes is about the most a stream writes at once: a client far
// behind gets its backlog in writes of this size.
const streamBatchBytes = 64 << 10

// streamBatches are the buffers in which streams gather a batch's frames:
// shared, since a stream needs one only while it writes.
var streamBatches = sync.Pool{New: func() any { return new([]byte) }}

// ping is the comment an idle stream sends every PingInterval.
var ping = []byte(": ping\n\n")

// startStream sends the headers of an event stream. streaming is false when
// nothing more is to be written: a HEAD request (the headers are the whole
// answer), or a response that cannot be flushed (logged).
func (s *Server) startStream(w http.ResponseWriter, r *http.Request) (rc *http.ResponseController, streaming bool, err error) {
	rc = http.NewResponseController(w)
	// A stream outlives any http.Server.WriteTimeout (each of its writes
	// gets a deadline of its own: streamWriter); not every writer supports
	// deadlines, and then there is none to clear.
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, false, fmt.Errorf("clear write deadline: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil, false, nil
	}
	if err := rc.Flush(); err != nil {
		s.log.Error("event stream: response cannot be flushed", "error", err, "request_id", requestID(r))
		return nil, false, nil
	}
	return rc, true, nil
}

// endStream logs why a stream ended early, unless the client or a shutdown
// ended it, or it panicked (logged with its stack where it was recovered).
func (s *Server) endStream(ctx context.Context, r *http.Request, err error) {
	if ctx.Err() != nil || errors.Is(err, errClientGone) || errors.Is(err, errStreamPanicked) {
		return
	}
	s.log.Error("event stream ended", "path", r.URL.Path, "error", err, "request_id", requestID(r))
}

// errClientGone: a write or flush to the client failed.
var errClientGone = errors.New("client gone")

// errStreamPanicked: the Backend's stream panicked (serveStream).
var errStreamPanicked = errors.New("event stream panicked")

// eventFrame encodes one event as a server-sent event whose id is id (the
// seq, or a tree stream's cursor: neither has a line break). json.Marshal
// never emits a raw newline (and compacts Data), so data is one line; the
// type is an engine constant, but a line break in it would split the frame,
// so it is replaced.
func eventFrame(ev *lt.Event, id string) ([]byte, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event %d of %s: %w", ev.Seq, ev.SessionID, err)
	}
	typ := strings.NewReplacer("\r", " ", "\n", " ").Replace(ev.Type)
	frame := make([]byte, 0, len(data)+len(typ)+len(id)+32)
	frame = append(frame, "id: "...)
	frame = append(frame, id...)
	frame = append(frame, "\nevent: "...)
	frame = append(frame, typ...)
	frame = append(frame, "\ndata: "...)
	frame = append(frame, data...)
	frame = append(frame, "\n\n"...)
	return frame, nil
}

// streamStart returns the seq the stream continues after: the Last-Event-ID
// header (what a reconnecting EventSource sends), else ?after=, else 0.
func streamStart(r *http.Request) (int64, error) {
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		if lt.IsTreeCursor(v) {
			return 0, errTreeCursorWithoutInclude("Last-Event-ID")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, apierror.Invalid("Last-Event-ID", "header Last-Event-ID must be an event seq (an integer >= 0), got %s", quoteField(v))
		}
		return n, nil
	}
	if v := r.URL.Query().Get("after"); lt.IsTreeCursor(v) {
		return 0, errTreeCursorWithoutInclude("after")
	}
	return queryInt(r, "after", 0, 0, math.MaxInt64)
}

// errTreeCursorWithoutInclude: a tree stream's cursor given to a stream of
// one session, which would lose the sub-agents' events it stands for.
func errTreeCursorWithoutInclude(field string) error {
	return apierror.Invalid(field, "%s is a session tree's cursor: it resumes only a stream with include=subagents", field)
}
