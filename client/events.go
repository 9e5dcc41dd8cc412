package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListEvents returns up to limit journal events with seq > after, in order
// (GET /v1/sessions/{id}/events?after=&limit=). limit 0 means the server's
// default page size.
func (c *Client) ListEvents(ctx context.Context, sessionID string, after int64, limit int) (*lt.List[lt.Event], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	if after < 0 {
		return nil, fmt.Errorf("list events of %s: after %d is negative", sessionID, after)
	}
	if err := checkLimit("limit", limit); err != nil {
		return nil, fmt.Errorf("list events of %s: %w", sessionID, err)
	}
	q := url.Values{}
	q.Set("after", strconv.FormatInt(after, 10))
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	l, err := get[lt.List[lt.Event]](ctx, c, c.endpoint(q, "v1", "sessions", sessionID, "events"))
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", sessionID, err)
	}
	return l, nil
}

// StreamEvents follows the session's journal live
// (GET /v1/sessions/{id}/events/stream) and yields every event with
// seq > after, in seq order, each exactly once.
//
// It never gives up on its own: when the connection drops, the server
// restarts, the stream ends or no byte (not even a ping) arrives for
// Config.StreamIdleTimeout, it reconnects with capped backoff and resumes
// with Last-Event-ID set to the last seq it yielded. An event at or below
// that seq is dropped; an event past the next seq (a gap) is preceded by the
// missing events, read with ListEvents. So a consumer sees the journal as it
// is: gap-free and without duplicates.
//
// The error is non-nil only once, as the last value: a terminal failure (the
// session does not exist, the API key is refused, the server sent something
// that is not an event stream) or ctx's error when ctx ends. Breaking out of
// the loop closes the connection.
func (c *Client) StreamEvents(ctx context.Context, sessionID string, after int64) iter.Seq2[lt.Event, error] {
	return func(yield func(lt.Event, error) bool) {
		if err := requireID("sessionID", sessionID); err != nil {
			yield(lt.Event{}, fmt.Errorf("stream events: %w", err))
			return
		}
		if after < 0 {
			yield(lt.Event{}, fmt.Errorf("stream events of %s: after %d is negative", sessionID, after))
			return
		}
		s := &stream{c: c, sessionID: sessionID, cursor: lt.TreeCursor{sessionID: after},
			emit: func(ev lt.Event) bool { return yield(ev, nil) }}
		if err := s.run(ctx); err != nil {
			yield(lt.Event{}, fmt.Errorf("stream events of %s: %w", sessionID, err))
		}
	}
}

// TreeEvent is one event of a session tree's stream (StreamTreeEvents);
// pass its Cursor to StreamTreeEvents to resume right after it.
type TreeEvent = lt.TreeEvent

// StreamTreeEvents follows the journals of a session and of all its
// sub-agents, recursively, merged into one stream
// (GET /v1/sessions/{id}/events/stream?include=subagents). Each session's
// events come in seq order, each exactly once; events of different sessions
// interleave as they happen. A sub-agent spawned at any moment, even while
// the stream was reconnecting, is followed from its first event.
//
// cursor says where to start: "" for the start of every journal, an event
// seq of the session (its sub-agents from their start), or the Cursor of
// the last TreeEvent handled, to resume exactly after it.
//
// Like StreamEvents it never gives up on its own: it reconnects with the
// cursor of the last event it yielded, drops events it already yielded and
// fills a gap in one session with ListEvents. The error is non-nil only
// once, as the last value: a terminal failure (an unknown session, a tree
// larger than the server serves, a refused key) or ctx's error. Breaking
// out of the loop closes the connection.
func (c *Client) StreamTreeEvents(ctx context.Context, sessionID, cursor string) iter.Seq2[TreeEvent, error] {
	return func(yield func(TreeEvent, error) bool) {
		if err := requireID("sessionID", sessionID); err != nil {
			yield(TreeEvent{}, fmt.Errorf("stream events of tree: %w", err))
			return
		}
		start, err := parseTreeStart(sessionID, cursor)
		if err != nil {
			yield(TreeEvent{}, fmt.Errorf("stream events of tree %s: %w", sessionID, err))
			return
		}
		s := &stream{c: c, sessionID: sessionID, tree: true, cursor: start}
		s.emit = func(ev lt.Event) bool { return yield(TreeEvent{Event: ev, Cursor: s.cursor.String()}, nil) }
		if err := s.run(ctx); err != nil {
			yield(TreeEvent{}, fmt.Errorf("stream events of tree %s: %w", sessionID, err))
		}
	}
}

// parseTreeStart reads StreamTreeEvents' cursor argument.
func parseTreeStart(root, cursor string) (lt.TreeCursor, error) {
	switch {
	case cursor == "":
		return lt.TreeCursor{}, nil
	case lt.IsTreeCursor(cursor):
		c, err := lt.ParseTreeCursor(cursor)
		if err != nil {
			return nil, fmt.Errorf("cursor: %w", err)
		}
		return c, nil
	}
	n, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("cursor %q is neither a stream cursor (%s…) nor an event seq", cursor, lt.TreeCursorPrefix)
	}
	return lt.TreeCursor{root: n}, nil
}

// errIdle is the cause of a connection dropped by the idle watchdog.
var errIdle = errors.New("no data within the stream idle timeout")

// terminalError marks a stream failure that reconnecting cannot fix.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

func terminal(err error) error { return &terminalError{err} }

// stream is the state of one StreamEvents or StreamTreeEvents iteration.
type stream struct {
	c         *Client
	sessionID string // the session streamed; a tree's root
	// tree: the stream carries the session's sub-agents' events too, and
	// resumes with the whole cursor.
	tree bool
	// cursor holds the seq of the last event yielded per session (or the
	// caller's start). A single session's stream keeps only sessionID.
	cursor lt.TreeCursor
	// emit yields an event to the consumer (the cursor already counts it);
	// false when the consumer broke out of its loop.
	emit    func(lt.Event) bool
	yielded int  // events yielded so far
	stopped bool // the consumer broke out of its loop
}

// key is the cursor entry of ev: its session in a tree, else the one
// session streamed.
func (s *stream) key(ev *lt.Event) string {
	if s.tree {
		return ev.SessionID
	}
	return s.sessionID
}

// run connects and reconnects until the consumer stops (nil), ctx ends or a
// terminal failure occurs (the error to yield).
func (s *stream) run(ctx context.Context) error {
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		healthy, retryHint, err := s.connect(ctx)
		if s.stopped {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		var te *terminalError
		if errors.As(err, &te) {
			return te.err
		}
		var delay time.Duration
		if healthy {
			// The connection was healthy: resume at once (or after the
			// server's retry hint), and start backing off afresh.
			failures = 0
			delay = min(retryHint, s.c.maxBackoff)
		} else {
			failures++
			delay = max(s.c.backoff(failures), min(retryHint, s.c.maxBackoff))
		}
		if delay > 0 {
			if err := s.c.sleep(ctx, delay); err != nil {
				return err
			}
		}
	}
}

// connect runs one connection. healthy reports whether it moved the stream
// on (it yielded events) or stayed open for at least MaxBackoff; retryHint
// is the server's retry field. A nil or non-terminal err means "reconnect".
func (s *stream) connect(ctx context.Context) (healthy bool, retryHint time.Duration, err error) {
	connCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	q := url.Values{}
	resume := strconv.FormatInt(s.cursor[s.sessionID], 10)
	if s.tree {
		// The cursor goes in the header only: it grows with the tree,
		// and a URL is the first thing a proxy limits.
		q.Set("include", "subagents")
		resume = s.cursor.String()
	} else {
		q.Set("after", resume)
	}
	req, err := http.NewRequestWithContext(connCtx, http.MethodGet,
		s.c.endpoint(q, "v1", "sessions", s.sessionID, "events", "stream"), nil)
	if err != nil {
		return false, 0, terminal(fmt.Errorf("build request: %w", err))
	}
	s.c.setHeaders(req)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.Set("Last-Event-ID", resume)

	start := s.c.now()
	resp, err := s.c.http.Do(req)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		ae := newAPIError(resp.StatusCode, resp.Header, body)
		if transientStatus(resp.StatusCode) {
			return false, retryAfter(ae), ae
		}
		return false, 0, terminal(ae)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, 0, terminal(fmt.Errorf("response Content-Type is %q, not text/event-stream", resp.Header.Get("Content-Type")))
	}

	wd := s.c.startWatchdog(connCtx, cancel)
	defer wd.stop()
	rd := newSSEReader(&touchReader{r: resp.Body, wd: wd})
	startYielded := s.yielded
	defer func() {
		retryHint = rd.retry
		healthy = s.yielded > startYielded || s.c.now().Sub(start) >= s.c.maxBackoff
	}()
	for {
		msg, err := rd.Next()
		if err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return false, 0, terminal(fmt.Errorf("event stream line longer than %d bytes", maxSSELine))
			}
			if cause := context.Cause(connCtx); errors.Is(cause, errIdle) {
				return false, 0, cause
			}
			return false, 0, err
		}
		var ev lt.Event
		if err := json.Unmarshal([]byte(msg.Data), &ev); err != nil {
			return false, 0, terminal(fmt.Errorf("decode event (id %q): %w", msg.ID, err))
		}
		if ev.Seq <= 0 {
			return false, 0, terminal(fmt.Errorf("event (id %q) has no seq", msg.ID))
		}
		if s.tree && ev.SessionID == "" {
			return false, 0, terminal(fmt.Errorf("event (id %q) of a tree stream has no session_id", msg.ID))
		}
		key := s.key(&ev)
		if ev.Seq <= s.cursor[key] {
			continue // already yielded: the server replayed from an earlier point
		}
		// From here the consumer or a back-fill holds the time, not the
		// network: the watchdog must not count it as silence.
		wd.setBusy(true)
		if ev.Seq > s.cursor[key]+1 {
			if err := s.backfill(ctx, key, ev.Seq); err != nil || s.stopped {
				wd.setBusy(false)
				return false, 0, err
			}
		}
		ok := s.yield(key, ev)
		wd.setBusy(false)
		if !ok {
			return false, 0, nil
		}
	}
}

// yield hands ev, the next event of session key, to the consumer.
func (s *stream) yield(key string, ev lt.Event) bool {
	s.cursor[key] = ev.Seq
	s.yielded++
	if !s.emit(ev) {
		s.stopped = true
		return false
	}
	return true
}

// backfill yields the events of session key between its cursor and upTo
// (exclusive), read with ListEvents, so that a gap in the stream never
// reaches the consumer.
func (s *stream) backfill(ctx context.Context, key string, upTo int64) error {
	for s.cursor[key] < upTo-1 {
		last := s.cursor[key]
		page, err := s.c.ListEvents(ctx, key, last, int(min(upTo-1-last, MaxListLimit)))
		if err != nil {
			var ae *APIError
			if errors.As(err, &ae) && !transientStatus(ae.Status) {
				return terminal(err)
			}
			return err // reconnect; the resumed stream starts after the cursor
		}
		for _, ev := range page.Data {
			if ev.Seq <= s.cursor[key] {
				continue
			}
			if ev.Seq != s.cursor[key]+1 {
				// The list, not only the stream, skips a seq: the
				// journal broke its gap-free promise. Say so rather
				// than hand the consumer a hole.
				return terminal(fmt.Errorf("journal gap: event %d follows %d in session %s", ev.Seq, s.cursor[key], key))
			}
			if ev.Seq >= upTo {
				break
			}
			if s.tree && ev.SessionID == "" {
				ev.SessionID = key // the list is of one session
			}
			if !s.yield(key, ev) {
				return nil
			}
		}
		if s.cursor[key] == last {
			// The server streamed seq upTo but cannot list what precedes
			// it; reconnect and let the resumed stream sort it out.
			return fmt.Errorf("back-fill of %s: no events after %d before %d", key, last, upTo)
		}
	}
	return nil
}

// transientStatus reports whether a stream response status may go away by
// itself, so that reconnecting makes sense.
func transientStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// watchdog drops a connection on which no byte arrived for idleTimeout,
// while the stream is waiting on the network (not while the consumer or a
// back-fill holds it).
type watchdog struct {
	mu   sync.Mutex
	last time.Time
	busy bool
	now  func() time.Time
	done chan struct{}
	once sync.Once
}

func (c *Client) startWatchdog(ctx context.Context, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{last: c.now(), now: c.now, done: make(chan struct{})}
	go func() {
		wait := c.idleTimeout
		for {
			select {
			case <-w.done:
				return
			case <-ctx.Done():
				return
			case <-c.after(wait):
			}
			w.mu.Lock()
			if w.busy {
				wait = c.idleTimeout
			} else if idle := w.now().Sub(w.last); idle >= c.idleTimeout {
				w.mu.Unlock()
				cancel(errIdle)
				return
			} else {
				wait = c.idleTimeout - idle
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *watchdog) touch() {
	w.mu.Lock()
	w.last = w.now()
	w.mu.Unlock()
}

func (w *watchdog) setBusy(b bool) {
	w.mu.Lock()
	w.busy = b
	w.last = w.now()
	w.mu.Unlock()
}

func (w *watchdog) stop() { w.once.Do(func() { close(w.done) }) }

// touchReader tells the watchdog about every byte read.
type touchReader struct {
	r  io.Reader
	wd *watchdog
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.wd.touch()
	}
	return n, err
}
