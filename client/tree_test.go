package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fakeTree serves a session tree's merged stream the way docs/api.md
// specifies (include=subagents, the t1. cursor in Last-Event-ID) and each
// session's event list. A per-connection plan makes one connection
// misbehave in one precise way.
type fakeTree struct {
	plan func(conn int) treePlan

	mu       sync.Mutex
	order    []string // sessions, in the order the stream visits them
	journals map[string][]lt.Event
	changed  chan struct{}
	conns    []http.Header // the headers of each stream request
	queries  []string      // the raw query of each stream request
	lists    []string      // "session after" of each list call
}

// treePlan shapes one stream connection.
type treePlan struct {
	status   int              // answer this status with a JSON error
	replay   bool             // ignore the cursor: send every journal from its start
	skip     map[string]int64 // leave out this seq of this session (a gap)
	cutAfter int              // end the connection after this many events
}

func newFakeTree(sessions ...string) *fakeTree {
	f := &fakeTree{journals: make(map[string][]lt.Event), changed: make(chan struct{})}
	f.plan = func(int) treePlan { return treePlan{} }
	for _, s := range sessions {
		f.add(s, 0)
	}
	return f
}

// add appends n events to session id (a new session joins the tree).
func (f *fakeTree) add(id string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.journals[id]; !ok {
		f.order = append(f.order, id)
		f.journals[id] = []lt.Event{}
	}
	for range n {
		seq := int64(len(f.journals[id]) + 1)
		f.journals[id] = append(f.journals[id], lt.Event{Seq: seq, Type: lt.EventToolCompleted, SessionID: id,
			Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq))})
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeTree) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, j := range f.journals {
		n += len(j)
	}
	return n
}

func (f *fakeTree) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sessions/{id}/events", f.list)
	mux.HandleFunc("GET /v1/sessions/{id}/events/stream", f.stream)
	return mux
}

func (f *fakeTree) list(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	f.mu.Lock()
	f.lists = append(f.lists, fmt.Sprintf("%s %d", id, after))
	j, ok := f.journals[id]
	var page []lt.Event
	for _, ev := range j {
		if ev.Seq > after && (limit == 0 || len(page) < limit) {
			page = append(page, ev)
		}
	}
	f.mu.Unlock()
	if !ok {
		writeAPIError(w, http.StatusNotFound, lt.CodeNotFound, "session not found")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(lt.List[lt.Event]{Data: page})
}

func (f *fakeTree) stream(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := len(f.conns)
	f.conns = append(f.conns, r.Header.Clone())
	f.queries = append(f.queries, r.URL.RawQuery)
	f.mu.Unlock()
	p := f.plan(n)
	if p.status != 0 {
		writeAPIError(w, p.status, codeForStatus(p.status), "planned failure")
		return
	}
	cursor, err := lt.ParseTreeCursor(r.Header.Get("Last-Event-ID"))
	if err != nil || p.replay {
		cursor = lt.TreeCursor{}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	sent := 0
	for {
		f.mu.Lock()
		var evs []lt.Event
		for _, id := range f.order {
			for _, ev := range f.journals[id] {
				if ev.Seq > cursor[id] {
					evs = append(evs, ev)
				}
			}
		}
		changed := f.changed
		f.mu.Unlock()
		for _, ev := range evs {
			cursor[ev.SessionID] = ev.Seq
			if p.skip[ev.SessionID] == ev.Seq {
				continue
			}
			if p.cutAfter > 0 && sent == p.cutAfter {
				fl.Flush()
				return
			}
			data, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", cursor, ev.Type, data)
			sent++
		}
		fl.Flush()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// treeCollect ranges over the tree stream until it has n events, checking
// that each session's events come in order, each once, and that each
// event's Cursor is the cursor after it.
func treeCollect(t *testing.T, c *Client, root, cursor string, n int, each func(TreeEvent)) []TreeEvent {
	t.Helper()
	model := lt.TreeCursor{}
	if cursor != "" {
		start, err := parseTreeStart(root, cursor)
		require.NoError(t, err)
		model = start
	}
	var got []TreeEvent
	for ev, err := range c.StreamTreeEvents(t.Context(), root, cursor) {
		require.NoError(t, err)
		require.Equal(t, model[ev.SessionID]+1, ev.Seq, "session %s: in order, each once", ev.SessionID)
		model[ev.SessionID] = ev.Seq
		require.Equal(t, model.String(), ev.Cursor)
		got = append(got, ev)
		if len(got) == n {
			break
		}
		if each != nil {
			each(ev)
		}
	}
	return got
}

func TestStreamTreeEventsFollowsTheTree(t *testing.T) {
	t.Parallel()
	f := newFakeTree("ses_root", "ses_c1")
	f.add("ses_root", 2)
	f.add("ses_c1", 3)
	srv := startServer(t, f.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	grown := false
	got := treeCollect(t, c, "ses_root", "", 9, func(ev TreeEvent) {
		if !grown {
			grown = true
			f.add("ses_g1", 2) // a sub-agent appears while the stream is open
			f.add("ses_root", 2)
		}
	})
	require.Len(t, got, 9)
	require.Equal(t, f.total(), len(got))
	require.Len(t, f.conns, 1, "one connection carries the live events")
	require.Equal(t, "include=subagents", f.queries[0], "the cursor travels in the header only")
	require.Equal(t, "t1.e30", f.conns[0].Get("Last-Event-ID"))

	// Resuming from an event's cursor yields exactly what came after it.
	f.add("ses_c1", 1)
	rest := treeCollect(t, c, "ses_root", got[4].Cursor, 5, nil)
	require.Equal(t, f.total(), 5+len(rest), "treeCollect checked each session's seqs from the cursor on")
	require.Subset(t, events(rest), events(got[5:]), "what came after the cursor, again")
	require.Contains(t, events(rest), f.journals["ses_c1"][3], "and what was appended since")
	require.Equal(t, got[4].Cursor, f.conns[1].Get("Last-Event-ID"))
}

func events(tes []TreeEvent) []lt.Event {
	out := make([]lt.Event, len(tes))
	for i, te := range tes {
		out[i] = te.Event
	}
	return out
}

func TestStreamTreeEventsResumesWithoutDuplicates(t *testing.T) {
	t.Parallel()
	f := newFakeTree("ses_root", "ses_c1", "ses_c2")
	f.add("ses_root", 3)
	f.add("ses_c1", 3)
	f.add("ses_c2", 3)
	f.plan = func(conn int) treePlan {
		if conn == 0 {
			return treePlan{cutAfter: 4}
		}
		// The resumed connection replays every journal from its start.
		return treePlan{replay: true}
	}
	srv := startServer(t, f.handler())
	c, sl := newTestClient(t, srv.URL, nil)

	got := treeCollect(t, c, "ses_root", "", 9, nil)
	require.Len(t, got, 9)
	require.Len(t, f.conns, 2)
	require.Equal(t, got[3].Cursor, f.conns[1].Get("Last-Event-ID"), "resumes after the last event yielded")
	require.Empty(t, sl.all(), "a healthy connection is resumed without backoff")
}

func TestStreamTreeEventsBackfillsAGapInOneSession(t *testing.T) {
	t.Parallel()
	f := newFakeTree("ses_root", "ses_c1")
	f.add("ses_root", 2)
	f.add("ses_c1", 3)
	f.plan = func(int) treePlan { return treePlan{skip: map[string]int64{"ses_c1": 2}} }
	srv := startServer(t, f.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	got := treeCollect(t, c, "ses_root", "", 5, nil)
	require.Len(t, got, 5)
	require.Equal(t, []string{"ses_c1 1"}, f.lists, "the gap is read from that session's list")
	require.Equal(t, "ses_c1", got[3].SessionID)
	require.EqualValues(t, 2, got[3].Seq)
}

func TestStreamTreeEventsStartCursors(t *testing.T) {
	t.Parallel()
	f := newFakeTree("ses_root", "ses_c1")
	f.add("ses_root", 3)
	f.add("ses_c1", 1)
	srv := startServer(t, f.handler())
	c, _ := newTestClient(t, srv.URL, nil)

	// A plain seq is the root's: its sub-agents from their start.
	got := treeCollect(t, c, "ses_root", "2", 2, nil)
	require.Equal(t, lt.TreeCursor{"ses_root": 2}.String(), f.conns[0].Get("Last-Event-ID"))
	require.Equal(t, []string{"ses_root", "ses_c1"}, []string{got[0].SessionID, got[1].SessionID})

	for _, bad := range []string{"-1", "soon", "t1.%%"} {
		var errs []error
		for _, err := range c.StreamTreeEvents(t.Context(), "ses_root", bad) {
			errs = append(errs, err)
		}
		require.Len(t, errs, 1, bad)
		require.ErrorContains(t, errs[0], "cursor", bad)
	}
	for _, err := range c.StreamTreeEvents(t.Context(), "", "") {
		require.ErrorContains(t, err, "sessionID is empty")
	}
	require.Len(t, f.conns, 1, "bad arguments send nothing")
}

func TestStreamTreeEventsEndsOnATerminalStatus(t *testing.T) {
	t.Parallel()
	f := newFakeTree("ses_root")
	f.plan = func(int) treePlan { return treePlan{status: http.StatusBadRequest} }
	srv := startServer(t, f.handler())
	c, _ := newTestClient(t, srv.URL, nil)
	var errs []error
	for _, err := range c.StreamTreeEvents(t.Context(), "ses_root", "") {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	var ae *APIError
	require.ErrorAs(t, errs[0], &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Len(t, f.conns, 1, "a 400 is not retried")
}
