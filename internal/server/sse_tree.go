package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// streamTree is GET /v1/sessions/{id}/events/stream?include=subagents: the
// journals of the session and of every session below it, merged into one
// stream of server-sent events. Per session, events go in seq order, each
// exactly once; across sessions they interleave as they come. Each frame's
// id is the stream's cursor after that event (lt.TreeCursor: the last seq
// sent per session), which the client sends back as Last-Event-ID or
// ?after= to resume; a plain seq there is the root's, its sub-agents from
// their start.
//
// Sub-agents are found twice over, so none is missed: at (re)connect by
// listing the tree (a child spawned while the client was away), and while
// streaming from each subagent.spawned event sent (a child spawned since),
// which the engine appends in the transaction that creates the child. A
// newly found child is streamed from the cursor's seq for it, else from its
// start. Each followed session is watched before it is read, as in
// streamEvents. The number followed is bounded by maxTreeSessions: a tree
// larger at connect is a 400; one that grows past it mid-stream ends the
// stream, and the reconnect gets the 400.
func (s *Server) streamTree(w http.ResponseWriter, r *http.Request) error {
	root := r.PathValue("id")
	start, field, err := treeStreamStart(r, root)
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

	ts := &treeStream{
		s:      s,
		root:   root,
		byID:   make(map[string]*followed),
		cursor: make(lt.TreeCursor),
		// cases[0] ends the wait with the stream; cases[1] is the ping
		// ticker, set once streaming (a zero Chan is ignored until then);
		// cases[2+i] is the watch of sessions[i].
		cases: []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}, {Dir: reflect.SelectRecv}},
	}
	defer ts.stopWatches()

	// The root is watched, then read: the first read answers 404 for an
	// unknown session while an error response can still be sent.
	rootFollow, err := ts.follow(ctx, root, start[root])
	if err != nil {
		return err
	}
	if rootFollow.pending, err = s.b.ListEvents(ctx, root, start[root], streamPage); err != nil {
		return err
	}
	members, err := s.descendants(ctx, root)
	if err != nil {
		return err
	}
	inTree := make(map[string]bool, len(members))
	for _, m := range members {
		inTree[m.id] = true
	}
	for id := range start {
		if id != root && !inTree[id] {
			return apierror.Invalid(field, "the cursor names session %s, which is not in the session tree of %s: "+
				"a cursor resumes only the stream it came from", quoteField(id), root)
		}
	}
	for _, m := range members {
		if _, err := ts.follow(ctx, m.id, start[m.id]); err != nil {
			return err
		}
	}

	rc, streaming, err := s.startStream(w, r)
	if err != nil || !streaming {
		return err
	}
	ts.w, ts.rc = s.streamWriter(w, rc), rc
	tick, stopTick := s.newTicker(s.cfg.PingInterval)
	defer stopTick()
	ts.cases[1].Chan = reflect.ValueOf(tick)

	for {
		if err := ts.drain(ctx); err != nil {
			s.endStream(ctx, r, err)
			return nil
		}
		chosen, v, ok := reflect.Select(ts.cases)
		switch chosen {
		case 0:
			return nil
		case 1:
			if err := writePing(ts.w, ts.rc); err != nil {
				return nil // the client left
			}
			// Read every session anyway: a notification may have been
			// dropped.
			for _, f := range ts.sessions {
				f.dirty = true
			}
		default:
			f := ts.sessions[chosen-2]
			if !ok {
				// The watch ended without our ctx ending: the backend is
				// stopping. The client resumes elsewhere or later.
				if ctx.Err() == nil {
					s.log.Info("event stream: session watch ended; closing the stream", "session_id", f.id, "root", root)
				}
				return nil
			}
			if v.Int() > ts.cursor[f.id] {
				f.dirty = true
			}
		}
	}
}

// treeStream is the state of one tree stream: the sessions it follows and
// the cursor (the last seq sent of each). Only the stream's goroutine uses
// it.
type treeStream struct {
	s    *Server
	w    io.Writer
	rc   *http.ResponseController
	root string
	// sessions are in the order they were followed: the root, the tree
	// listed at connect, then each child as it is found.
	sessions []*followed
	byID     map[string]*followed
	cursor   lt.TreeCursor
	cases    []reflect.SelectCase
}

// followed is one session of a tree stream.
type followed struct {
	id   string
	stop func()
	// dirty: the journal may have grown past the cursor; read it.
	dirty bool
	// pending is a first page read before streaming began, sent first.
	pending []lt.Event
}

// errTreeGrew ends a stream whose tree grew past maxTreeSessions.
var errTreeGrew = fmt.Errorf("the session tree grew past %d sessions; the client's reconnect gets a 400", maxTreeSessions)

// follow watches session id and marks it to be read from after (a no-op for
// a session already followed). Past maxTreeSessions it refuses: with
// treeTooLarge before the stream starts, errTreeGrew after.
func (ts *treeStream) follow(ctx context.Context, id string, after int64) (*followed, error) {
	if f, ok := ts.byID[id]; ok {
		return f, nil
	}
	if len(ts.sessions) >= maxTreeSessions {
		if ts.w == nil {
			return nil, treeTooLarge(ts.root)
		}
		return nil, errTreeGrew
	}
	updates, stop := ts.s.b.WatchSession(ctx, id)
	f := &followed{id: id, stop: stop, dirty: true}
	ts.sessions = append(ts.sessions, f)
	ts.byID[id] = f
	ts.cases = append(ts.cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(updates)})
	if after > 0 {
		ts.cursor[id] = after
	}
	return f, nil
}

func (ts *treeStream) stopWatches() {
	for _, f := range ts.sessions {
		f.stop()
	}
}

// drain reads and sends every dirty session's events after the cursor. A
// session found meanwhile is appended to sessions, dirty, and so read in
// the same pass.
func (ts *treeStream) drain(ctx context.Context) error {
	for i := 0; i < len(ts.sessions); i++ {
		f := ts.sessions[i]
		if !f.dirty {
			continue
		}
		f.dirty = false
		events := f.pending
		f.pending = nil
		for {
			if events == nil {
				var err error
				if events, err = ts.s.b.ListEvents(ctx, f.id, ts.cursor[f.id], streamPage); err != nil {
					return fmt.Errorf("list events of %s after %d: %w", f.id, ts.cursor[f.id], err)
				}
			}
			if err := ts.send(ctx, f.id, events); err != nil {
				return err
			}
			if len(events) < streamPage {
				break
			}
			events = nil
		}
	}
	return nil
}

// send writes the events of session id in order, each with the cursor
// after it as its id, and flushes. As in eventStream.send, a seq at or
// below the cursor's is skipped and a gap ends the stream (the reconnect
// re-reads it). A subagent.spawned event sent makes its child followed.
func (ts *treeStream) send(ctx context.Context, id string, events []lt.Event) error {
	if len(events) == 0 {
		return nil
	}
	for i := range events {
		ev := &events[i]
		after := ts.cursor[id]
		if ev.Seq <= after {
			continue
		}
		if ev.Seq != after+1 {
			return fmt.Errorf("journal gap in session %s: seq %d follows %d", id, ev.Seq, after)
		}
		if ev.SessionID != id {
			// The client keeps its cursor by the event's session_id.
			return fmt.Errorf("journal of session %s holds event %d of session %q", id, ev.Seq, ev.SessionID)
		}
		ts.cursor[id] = ev.Seq
		frame, err := eventFrame(ev, ts.cursor.String())
		if err != nil {
			return err
		}
		if _, err := ts.w.Write(frame); err != nil {
			return errClientGone
		}
		if ev.Type == lt.EventSubagentSpawned {
			if err := ts.spawned(ctx, ev); err != nil {
				return err
			}
		}
	}
	if err := ts.rc.Flush(); err != nil {
		return errClientGone
	}
	return nil
}

// spawned follows the child a subagent.spawned event names, from its
// start. When the event's data was moved to a blob (a long input), its
// child_id is not inline: the session's children are listed instead, and
// the new one is among them (it was created with the event).
func (ts *treeStream) spawned(ctx context.Context, ev *lt.Event) error {
	var d struct {
		ChildID string `json:"child_id"`
	}
	if json.Unmarshal(ev.Data, &d) == nil && d.ChildID != "" {
		_, err := ts.follow(ctx, d.ChildID, 0)
		return err
	}
	kids, err := ts.s.children(ctx, ev.SessionID, maxTreeSessions)
	if errors.Is(err, errTooManyChildren) {
		return errTreeGrew
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if _, err := ts.follow(ctx, k, 0); err != nil {
			return err
		}
	}
	return nil
}

// treeStreamStart returns where a tree stream resumes, and the field it was
// read from: the Last-Event-ID header, else ?after=, else the start. A tree
// cursor resumes each session it names; a plain seq is the root's.
func treeStreamStart(r *http.Request, root string) (lt.TreeCursor, string, error) {
	field := "Last-Event-ID"
	v := strings.TrimSpace(r.Header.Get(field))
	if v == "" {
		field = "after"
		var err error
		if v, err = queryString(r, field); err != nil {
			return nil, field, err
		}
	}
	if v == "" {
		return lt.TreeCursor{}, field, nil
	}
	if lt.IsTreeCursor(v) {
		c, err := lt.ParseTreeCursor(v)
		if err != nil {
			return nil, field, apierror.Invalid(field, "%s is not a valid cursor: %v", field, err)
		}
		if len(c) > maxTreeSessions {
			return nil, field, apierror.Invalid(field, "%s names %d sessions; a session tree streams at most %d", field, len(c), maxTreeSessions)
		}
		return c, field, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, field, apierror.Invalid(field, "%s must be a stream cursor (%s…) or an event seq of the session (an integer >= 0), got %s",
			field, lt.TreeCursorPrefix, quoteField(v))
	}
	return lt.TreeCursor{root: n}, field, nil
}
