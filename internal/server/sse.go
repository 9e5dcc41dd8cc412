package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// streamPage is how many events the stream reads per ListEvents call.
const streamPage = 500

// streamEvents is GET /v1/sessions/{id}/events/stream: the session's journal
// as server-sent events, from the resume point on, one frame per event:
//
//	id: <seq>
//	event: <type>
//	data: <the event as JSON, on one line>
//
// and a ": ping" comment every PingInterval. It subscribes before it reads,
// then alternates reading everything after the last seq sent with waiting
// for a notification, a ping tick or the end; so every seq is sent exactly
// once and in order, and an event appended at any moment is seen. It stays
// open across turns and ends only when the client leaves or Shutdown is
// called (the client then resumes with Last-Event-ID).
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
	if s.base.Err() != nil {
		return apierror.Unavailable("the server is shutting down; reconnect to another server or later")
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stopOnShutdown := context.AfterFunc(s.base, cancel)
	defer stopOnShutdown()

	// Subscribe first: an event appended after the first read but before the
	// subscription would otherwise wait for the next event or ping.
	updates, stopWatch := s.b.WatchSession(ctx, id)
	defer stopWatch()

	// The first read also answers 404 for an unknown session, while an
	// error response can still be sent.
	events, err := s.b.ListEvents(ctx, id, after, streamPage)
	if err != nil {
		return err
	}

	rc, streaming, err := s.startStream(w, r)
	if err != nil || !streaming {
		return err
	}

	tick, stopTick := s.newTicker(s.cfg.PingInterval)
	defer stopTick()

	st := &eventStream{w: s.streamWriter(w, rc), rc: rc, after: after}
	for {
		if err := s.drain(ctx, st, id, events); err != nil {
			s.endStream(ctx, r, err)
			return nil
		}
		events = nil
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case seq, ok := <-updates:
				if !ok {
					// The watch ended without our ctx ending: the backend is
					// stopping. The client resumes elsewhere or later.
					if ctx.Err() == nil {
						s.log.Info("event stream: session watch ended; closing the stream", "session_id", id)
					}
					return nil
				}
				if seq > st.after {
					break wait
				}
			case <-tick:
				if err := st.ping(); err != nil {
					return nil // the client left
				}
				// Read anyway: a notification may have been dropped.
				break wait
			}
		}
	}
}

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

// drain sends events, then reads and sends pages after the last seq sent
// until a page comes back short (the stream has caught up).
func (s *Server) drain(ctx context.Context, st *eventStream, id string, events []lt.Event) error {
	for {
		if events == nil {
			var err error
			if events, err = s.b.ListEvents(ctx, id, st.after, streamPage); err != nil {
				return fmt.Errorf("list events after %d: %w", st.after, err)
			}
		}
		if err := st.send(events); err != nil {
			return err
		}
		if len(events) < streamPage {
			return nil
		}
		events = nil
	}
}

// endStream logs why a stream ended early, unless the client or a shutdown
// ended it.
func (s *Server) endStream(ctx context.Context, r *http.Request, err error) {
	if ctx.Err() != nil || errors.Is(err, errClientGone) {
		return
	}
	s.log.Error("event stream ended", "path", r.URL.Path, "error", err, "request_id", requestID(r))
}

// errClientGone: a write or flush to the client failed.
var errClientGone = errors.New("client gone")

// eventStream writes frames and remembers the last seq sent.
type eventStream struct {
	w     io.Writer
	rc    *http.ResponseController
	after int64
}

// send writes events in order and flushes. A seq at or below the last one
// sent is skipped (never repeated); a gap ends the stream, since sending past
// it would lose an event for good, while the client's reconnect re-reads it.
func (st *eventStream) send(events []lt.Event) error {
	if len(events) == 0 {
		return nil
	}
	for i := range events {
		ev := &events[i]
		if ev.Seq <= st.after {
			continue
		}
		if ev.Seq != st.after+1 {
			return fmt.Errorf("journal gap: seq %d follows %d", ev.Seq, st.after)
		}
		frame, err := eventFrame(ev, strconv.FormatInt(ev.Seq, 10))
		if err != nil {
			return err
		}
		if _, err := st.w.Write(frame); err != nil {
			return errClientGone
		}
		st.after = ev.Seq
	}
	if err := st.rc.Flush(); err != nil {
		return errClientGone
	}
	return nil
}

// ping writes a comment line that keeps proxies and clients from timing out.
func (st *eventStream) ping() error { return writePing(st.w, st.rc) }

// writePing writes and flushes a ": ping" comment.
func writePing(w io.Writer, rc *http.ResponseController) error {
	if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
		return errClientGone
	}
	if err := rc.Flush(); err != nil {
		return errClientGone
	}
	return nil
}

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
