package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// StreamTreeEvents follows the journals of session root and of every
// session below it, merged into one stream. Per session, events come in
// seq order, each exactly once; across sessions they interleave as they
// come. Each value's Cursor is the stream's position after that event (an
// lt.TreeCursor: the last seq yielded per session), which resumes it.
//
// Sub-agents are found twice over, so none is missed: at the start by
// listing the tree (a child spawned while the caller was away), and while
// streaming from each subagent.spawned event yielded (a child spawned
// since), which the engine appends in the transaction that creates the
// child. A newly found child is followed from the cursor's seq for it,
// else from its start. Each followed session is watched before it is
// read, and read again on a poll; as in StreamEvents, the streams of a
// session share its feed (streamtail.go): one watch, and what a notice
// announced read once for all of them.
//
// cursor is where it starts, as ParseTreeStart reads it: "", a tree
// cursor, or a plain seq of the root (its sub-agents from their start).
// Errors the request caused come first, before WithOpened's callback: an
// unknown root (404), a cursor that is neither a tree cursor nor a seq, or
// names more sessions than engine.MaxTreeSessions or a session not in the
// tree (400 naming cursor), a tree past the bound (400 naming include). A tree that
// grows past the bound while followed ends the stream with an error: the
// caller's next start gets the 400.
func (t *Trees) StreamTreeEvents(ctx context.Context, root, cursor string) iter.Seq2[lt.TreeEvent, error] {
	return func(yield func(lt.TreeEvent, error) bool) {
		start, err := ParseTreeStart(root, cursor, "cursor")
		if err != nil {
			yield(lt.TreeEvent{}, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		ts := &treeStream{
			t:      t,
			root:   root,
			byID:   make(map[string]*followed),
			cursor: make(lt.TreeCursor),
			notes:  make(chan note),
		}
		defer ts.close(cancel)

		// The root is watched, then read: the first read finds an unknown
		// session before the stream opens.
		rootFollow, err := ts.follow(ctx, root, start[root])
		if err != nil {
			yield(lt.TreeEvent{}, err)
			return
		}
		if rootFollow.pending, err = t.src.ListEvents(ctx, root, start[root], streamPage); err != nil {
			yield(lt.TreeEvent{}, err)
			return
		}
		members, err := t.tree(ctx, root)
		if err != nil {
			yield(lt.TreeEvent{}, err)
			return
		}
		inTree := make(map[string]bool, len(members))
		for _, m := range members {
			inTree[m.ID] = true
		}
		for id := range start {
			if id != root && !inTree[id] {
				yield(lt.TreeEvent{}, apierror.Invalid("cursor", "the cursor names session %s, which is not in the session tree of %s: "+
					"a cursor resumes only the stream it came from", quoteValue(id), root))
				return
			}
		}
		for _, m := range members {
			if _, err := ts.follow(ctx, m.ID, start[m.ID]); err != nil {
				yield(lt.TreeEvent{}, err)
				return
			}
		}
		ts.open = true
		caughtUp := takeCaughtUp(ctx)
		markOpened(ctx)

		poll, stopPoll := t.newPoll()
		defer stopPoll()
		for {
			if err := ts.drain(ctx, yield); err != nil {
				if !errors.Is(err, errStopped) && ctx.Err() == nil {
					yield(lt.TreeEvent{}, err)
				}
				return
			}
			caughtUp()
			select {
			case <-ctx.Done():
				return
			case <-poll:
				// Read every session from the store: a notice may have
				// been lost.
				for _, f := range ts.sessions {
					f.dirty, f.want = true, 0
				}
			case n := <-ts.notes:
				if !n.open {
					return // the engine is stopping; the caller resumes later
				}
				if n.seq > ts.cursor[n.f.id] {
					n.f.dirty, n.f.want = true, n.seq
				}
			}
		}
	}
}

// ParseTreeStart parses where a tree stream of root starts, as
// StreamTreeEvents takes it: "" is the start of every session; a tree
// cursor (lt.TreeCursorPrefix…) resumes each session it names; a plain
// event seq is the root's, its sub-agents from their start. An error is a
// 400 naming field, in its message too: StreamTreeEvents names its
// parameter "cursor", and the HTTP API the header or query parameter the
// value came in, checking it with this before it starts the stream.
func ParseTreeStart(root, v, field string) (lt.TreeCursor, error) {
	if v == "" {
		return lt.TreeCursor{}, nil
	}
	if lt.IsTreeCursor(v) {
		c, err := lt.ParseTreeCursor(v)
		if err != nil {
			return nil, apierror.Invalid(field, "%s is not a valid cursor: %v", field, err)
		}
		if len(c) > engine.MaxTreeSessions {
			return nil, apierror.Invalid(field, "%s names %d sessions; a session tree streams at most %d", field, len(c), engine.MaxTreeSessions)
		}
		return c, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, apierror.Invalid(field, "%s must be a stream cursor (%s…) or an event seq of the session (an integer >= 0), got %s",
			field, lt.TreeCursorPrefix, quoteValue(v))
	}
	return lt.TreeCursor{root: n}, nil
}

// treeStream is the state of one tree stream: the sessions it follows and
// the cursor (the last seq yielded of each). Only the stream's goroutine
// uses it, but for notes, which each watch's forwarder sends.
type treeStream struct {
	t    *Trees
	root string
	// sessions are in the order they were followed: the root, the tree
	// listed at the start, then each child as it is found.
	sessions []*followed
	byID     map[string]*followed
	cursor   lt.TreeCursor
	// open: the stream has opened; growth past the bound now ends it.
	open bool
	// notes receives what every watch reports, one forwarder per watch.
	notes chan note
	// forwarders counts the watches' forwarders, waited for on close.
	forwarders sync.WaitGroup
}

// followed is one session of a tree stream.
type followed struct {
	id   string
	feed *feed
	stop func()
	// dirty: the journal may have grown past the cursor; read it.
	dirty bool
	// want is the seq the feed last announced, which its tail may hold
	// already; 0 (a first read, a poll) reads the store.
	want int64
	// pending is a first page read before the stream opened, sent first.
	pending []lt.Event
}

// note is what a watch reported: a session's last seq, or (open false)
// that the watch closed.
type note struct {
	f    *followed
	seq  int64
	open bool
}

// errTreeGrew ends a stream whose tree grew past engine.MaxTreeSessions.
var errTreeGrew = fmt.Errorf("the session tree grew past %d sessions; the client's reconnect gets a 400", engine.MaxTreeSessions)

// errStopped: the consumer stopped the iteration.
var errStopped = errors.New("stream stopped by its consumer")

// follow watches session id, forwarding its notices to notes, and marks
// it to be read from after (a no-op for a session already followed). Past
// engine.MaxTreeSessions it refuses: with treeTooLarge before the stream
// opens, errTreeGrew after.
func (ts *treeStream) follow(ctx context.Context, id string, after int64) (*followed, error) {
	if f, ok := ts.byID[id]; ok {
		return f, nil
	}
	if len(ts.sessions) >= engine.MaxTreeSessions {
		if !ts.open {
			return nil, treeTooLarge(ts.root)
		}
		return nil, errTreeGrew
	}
	// The session's shared feed (streamtail.go), as StreamEvents follows
	// it: its watch is on once acquired, and every append after view was
	// loaded announces a newer view.
	fd := ts.t.feeds.acquire(ts.t.src, id)
	view := fd.view.Load()
	f := &followed{id: id, feed: fd, stop: func() { ts.t.feeds.release(id, fd) }, dirty: true}
	ts.sessions = append(ts.sessions, f)
	ts.byID[id] = f
	if after > 0 {
		ts.cursor[id] = after
	}
	ts.forwarders.Add(1)
	go func() {
		defer ts.forwarders.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-view.changed:
				view = fd.view.Load()
				select {
				case ts.notes <- note{f: f, seq: view.announced, open: !view.closed}:
				case <-ctx.Done():
					return
				}
				if view.closed {
					return
				}
			}
		}
	}()
	return f, nil
}

// close ends the forwarders (cancel ends their ctx) and stops every watch.
func (ts *treeStream) close(cancel context.CancelFunc) {
	cancel()
	ts.forwarders.Wait()
	for _, f := range ts.sessions {
		f.stop()
	}
}

// drain reads and yields every dirty session's events after the cursor. A
// session found meanwhile is appended to sessions, dirty, and so read in
// the same pass.
func (ts *treeStream) drain(ctx context.Context, yield func(lt.TreeEvent, error) bool) error {
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
				if events, err = ts.list(ctx, f); err != nil {
					return fmt.Errorf("list events of %s after %d: %w", f.id, ts.cursor[f.id], err)
				}
			}
			if err := ts.send(ctx, f.id, events, yield); err != nil {
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

// list returns the events of f after the cursor: from its feed's tail
// when that holds every one up to what the feed announced, else (and then
// kept in the tail for the other streams) from the store.
func (ts *treeStream) list(ctx context.Context, f *followed) ([]lt.Event, error) {
	after := ts.cursor[f.id]
	if evs := f.feed.view.Load().covering(after, f.want); evs != nil {
		return evs, nil
	}
	evs, err := ts.t.src.ListEvents(ctx, f.id, after, streamPage)
	if err != nil {
		return nil, err
	}
	f.feed.keep(evs)
	return evs, nil
}

// send yields the events of session id in order, each with the cursor
// after it. As in StreamEvents, a seq at or below the cursor's is skipped
// and a gap ends the stream (the caller's next start reads it again). A
// subagent.spawned event yielded makes its child followed.
func (ts *treeStream) send(ctx context.Context, id string, events []lt.Event, yield func(lt.TreeEvent, error) bool) error {
	for i := range events {
		ev := events[i]
		after := ts.cursor[id]
		if ev.Seq <= after {
			continue
		}
		if ev.Seq != after+1 {
			return fmt.Errorf("journal gap in session %s: seq %d follows %d", id, ev.Seq, after)
		}
		if ev.SessionID != id {
			// The caller keeps its cursor by the event's session_id.
			return fmt.Errorf("journal of session %s holds event %d of session %q", id, ev.Seq, ev.SessionID)
		}
		ts.cursor[id] = ev.Seq
		if !yield(lt.TreeEvent{Event: ev, Cursor: ts.cursor.String()}, nil) {
			return errStopped
		}
		if ev.Type == lt.EventSubagentSpawned {
			if err := ts.spawned(ctx, &ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// spawned follows the child a subagent.spawned event names, from its
// start. When the event's data was moved to a blob (a long input), its
// child_id is not inline: the session's children are listed instead, and
// the new one is among them (it was created with the event).
func (ts *treeStream) spawned(ctx context.Context, ev *lt.Event) error {
	var d lt.SubagentSpawnedData
	if json.Unmarshal(ev.Data, &d) == nil && d.ChildID != "" {
		_, err := ts.follow(ctx, d.ChildID, 0)
		return err
	}
	kids, err := ts.t.src.SessionChildren(ctx, ev.SessionID, engine.MaxTreeSessions)
	if errors.Is(err, store.ErrTreeTooLarge) {
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
