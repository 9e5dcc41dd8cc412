package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fakeJournal serves one session's journal the way API.md specifies: the
// list endpoint, and the SSE stream with resume by Last-Event-ID (or
// ?after=), pings as comments, and JSON error bodies. A per-connection plan
// makes a stream connection misbehave in one precise way.
type fakeJournal struct {
	sessionID string
	plan      func(conn int) streamPlan

	mu      sync.Mutex
	events  []lt.Event
	changed chan struct{} // closed and replaced when events grow
	conns   []connInfo
	lists   []int64 // the after of each list call
	open    int     // stream handlers running
}

// connInfo is what one stream request asked for.
type connInfo struct {
	lastEventID string
	after       string
}

// streamPlan shapes one stream connection.
type streamPlan struct {
	status     int            // answer this status with a JSON error instead of streaming
	skip       map[int64]bool // leave these seqs out (a gap)
	replayFrom int64          // start at this seq whatever the client asked (duplicates)
	cutAfter   int            // after this many events, write half of the next one and end
	abort      bool           // end a cut by breaking the connection, not closing the body
	limit      int            // send at most this many events, then stay silent
	crlf       bool           // end lines with CRLF
	pretty     bool           // spread each event's JSON over several data lines
}

func newFakeJournal(sessionID string, n int) *fakeJournal {
	j := &fakeJournal{sessionID: sessionID, changed: make(chan struct{})}
	j.plan = func(int) streamPlan { return streamPlan{} }
	j.append(n)
	return j
}

// append adds n events with the next seqs.
func (j *fakeJournal) append(n int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for range n {
		seq := int64(len(j.events) + 1)
		j.events = append(j.events, lt.Event{
			Seq:       seq,
			Type:      lt.EventToolCompleted,
			Time:      time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(seq) * time.Second),
			SessionID: j.sessionID,
			TurnID:    "turn_1",
			Data:      json.RawMessage(fmt.Sprintf(`{"n":%d,"text":"line one\nline two"}`, seq)),
		})
	}
	close(j.changed)
	j.changed = make(chan struct{})
}

// after returns the events with seq > seq and a channel closed on growth.
func (j *fakeJournal) after(seq int64) ([]lt.Event, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []lt.Event
	for _, ev := range j.events {
		if ev.Seq > seq {
			out = append(out, ev)
		}
	}
	return out, j.changed
}

func (j *fakeJournal) connInfos() []connInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]connInfo(nil), j.conns...)
}

func (j *fakeJournal) listCalls() []int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]int64(nil), j.lists...)
}

func (j *fakeJournal) openStreams() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.open
}

func (j *fakeJournal) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sessions/{id}/events", j.list)
	mux.HandleFunc("GET /v1/sessions/{id}/events/stream", j.stream)
	return mux
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(lt.ErrorResponse{Error: lt.Error{Code: code, Message: msg}})
}

func (j *fakeJournal) list(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("id") != j.sessionID {
		writeAPIError(w, http.StatusNotFound, lt.CodeNotFound, "session not found")
		return
	}
	after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, lt.CodeInvalidRequest, "bad after")
		return
	}
	limit := 50
	if s := r.URL.Query().Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil {
			writeAPIError(w, http.StatusBadRequest, lt.CodeInvalidRequest, "bad limit")
			return
		}
	}
	j.mu.Lock()
	j.lists = append(j.lists, after)
	j.mu.Unlock()
	evs, _ := j.after(after)
	page := lt.List[lt.Event]{Data: evs}
	if len(evs) > limit {
		page.Data = evs[:limit]
		next := strconv.FormatInt(evs[limit-1].Seq, 10)
		page.NextCursor = &next
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}

func (j *fakeJournal) stream(w http.ResponseWriter, r *http.Request) {
	j.mu.Lock()
	n := len(j.conns)
	j.conns = append(j.conns, connInfo{lastEventID: r.Header.Get("Last-Event-ID"), after: r.URL.Query().Get("after")})
	j.open++
	j.mu.Unlock()
	defer func() {
		j.mu.Lock()
		j.open--
		j.mu.Unlock()
	}()
	if r.PathValue("id") != j.sessionID {
		writeAPIError(w, http.StatusNotFound, lt.CodeNotFound, "session "+r.PathValue("id")+" not found")
		return
	}
	p := j.plan(n)
	if p.status != 0 {
		writeAPIError(w, p.status, codeForStatus(p.status), "planned failure")
		return
	}
	// Resume: Last-Event-ID wins over ?after=, as in API.md.
	resume := r.Header.Get("Last-Event-ID")
	if resume == "" {
		resume = r.URL.Query().Get("after")
	}
	from, _ := strconv.ParseInt(resume, 10, 64)
	if p.replayFrom > 0 {
		from = p.replayFrom - 1
	}
	eol := "\n"
	if p.crlf {
		eol = "\r\n"
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fmt.Fprint(w, ": ping"+eol+eol)
	fl.Flush()
	sent := 0
	for {
		evs, changed := j.after(from)
		for _, ev := range evs {
			from = ev.Seq
			if p.skip[ev.Seq] {
				continue
			}
			if p.limit > 0 && sent == p.limit {
				fl.Flush()
				<-r.Context().Done()
				return
			}
			frame := sseFrame(ev, eol, p.pretty)
			if p.cutAfter > 0 && sent == p.cutAfter {
				fmt.Fprint(w, frame[:len(frame)/2])
				fl.Flush()
				if p.abort {
					panic(http.ErrAbortHandler)
				}
				return
			}
			fmt.Fprint(w, frame)
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

// sseFrame encodes one event as the server sends it.
func sseFrame(ev lt.Event, eol string, pretty bool) string {
	var data []byte
	if pretty {
		data, _ = json.MarshalIndent(ev, "", "  ")
	} else {
		data, _ = json.Marshal(ev)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "id: %d%sevent: %s%s", ev.Seq, eol, ev.Type, eol)
	for _, line := range bytes.Split(data, []byte("\n")) {
		fmt.Fprintf(&b, "data: %s%s", line, eol)
	}
	b.WriteString(eol)
	return b.String()
}

// startServer serves h on a fresh loopback listener.
func startServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// startServerAt serves h on addr, as a restarted server would.
func startServerAt(t *testing.T, h http.Handler, addr string) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	require.NoError(t, srv.Listener.Close())
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// sleeps records backoff delays and returns at once.
type sleeps struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.ds = append(s.ds, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ds...)
}

// manualClock is a clock that moves only when the test advances it.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []manualTimer
}

type manualTimer struct {
	at time.Time
	ch chan time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, manualTimer{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- c.now
	}
	c.timers = kept
}

// newTestClient returns a client of srvURL whose backoff sleeps return at
// once.
func newTestClient(t *testing.T, srvURL string, cfg *Config) (*Client, *sleeps) {
	t.Helper()
	s := &sleeps{}
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.Sleep == nil {
		cfg.Sleep = s.sleep
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = ownTransport(t)
	}
	c, err := New(srvURL, cfg)
	require.NoError(t, err)
	return c, s
}

// ownTransport is an HTTP client with a transport of its own. A client on
// http.DefaultTransport fails now and then with "CloseIdleConnections
// called": httptest.Server.Close, in a test running in parallel, closes the
// default transport's idle connections, one of which this client's request
// may have just taken.
func ownTransport(t *testing.T) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// seqs returns the seqs of evs.
func seqs(evs []lt.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// collect ranges over the stream until it has n events, failing on any
// error.
func collect(t *testing.T, ctx context.Context, c *Client, sessionID string, after int64, n int) []lt.Event {
	t.Helper()
	var got []lt.Event
	for ev, err := range c.StreamEvents(ctx, sessionID, after) {
		require.NoError(t, err)
		got = append(got, ev)
		if len(got) == n {
			break
		}
	}
	return got
}
