package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// treeBackend is an in-memory engine of session trees: sessions with a
// parent, journals and actions, and watches. It serves the reads the
// application's tree and stream use cases make (app.Journals), walking its
// tree with the engine's own walk (store.WalkTree over its SessionList).
// Spawning a child appends subagent.spawned to the parent's journal in the
// same critical section, as the engine does in one transaction. It
// outlives the Servers put in front of it, so a test can "restart" the
// server over the same data.
type treeBackend struct {
	mu       sync.Mutex
	now      time.Time
	sessions map[string]*treeSession
	order    []string // creation order
	watchers map[string]map[chan int64]struct{}
}

type treeSession struct {
	sess    lt.Session
	events  []lt.Event
	actions []lt.Action
}

func newTreeBackend() *treeBackend {
	return &treeBackend{
		now:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		sessions: make(map[string]*treeSession),
		watchers: make(map[string]map[chan int64]struct{}),
	}
}

// tick advances the fake clock (creation order is time order).
func (b *treeBackend) tick() time.Time {
	b.now = b.now.Add(time.Millisecond)
	return b.now
}

// create makes a session under parent ("" for a root) and returns its id.
func (b *treeBackend) create(parent string) string {
	return b.createWith(parent, nil)
}

// createWith is create with the data of the parent's subagent.spawned event
// given (nil: the usual {"child_id": …}).
func (b *treeBackend) createWith(parent string, spawnedData json.RawMessage) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := fmt.Sprintf("ses_%04d", len(b.order)+1)
	at := b.tick()
	s := &treeSession{sess: lt.Session{ID: id, Status: lt.SessionRunning, Agent: lt.AgentRef{Name: "worker", Version: 1},
		Input: "task of " + id, CreatedAt: at, UpdatedAt: at}}
	if parent != "" {
		p := parent
		s.sess.ParentID = &p
	}
	b.sessions[id] = s
	b.order = append(b.order, id)
	b.appendLocked(id, lt.EventSessionCreated, json.RawMessage(`{"input":"task"}`))
	if parent != "" {
		if spawnedData == nil {
			spawnedData = json.RawMessage(`{"step":1,"index":0,"call_id":"call_1","child_id":"` + id + `","input":"task"}`)
		}
		b.appendLocked(parent, lt.EventSubagentSpawned, spawnedData)
	}
	return id
}

// emit appends n events to the session's journal and notifies its
// watchers.
func (b *treeBackend) emit(id string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range n {
		b.appendLocked(id, lt.EventToolCompleted, json.RawMessage(`{"tool":"shell"}`))
	}
}

// emitSilently appends an event without notifying anyone: a lost
// notification.
func (b *treeBackend) emitSilently(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[id]
	s.events = append(s.events, lt.Event{Seq: int64(len(s.events) + 1), Type: lt.EventToolCompleted, Time: b.tick(),
		SessionID: id, Data: json.RawMessage(`{"tool":"shell"}`)})
}

func (b *treeBackend) appendLocked(id, typ string, data json.RawMessage) {
	s := b.sessions[id]
	seq := int64(len(s.events) + 1)
	s.events = append(s.events, lt.Event{Seq: seq, Type: typ, Time: b.tick(), SessionID: id, Data: data})
	for w := range b.watchers[id] {
		select { // keep only the newest seq, as the engine's hub does
		case <-w:
		default:
		}
		w <- seq
	}
}

// addAction adds an action to a session, with action.required.
func (b *treeBackend) addAction(id string, status lt.ActionStatus) lt.Action {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[id]
	a := lt.Action{ID: fmt.Sprintf("act_%s_%d", id, len(s.actions)+1), SessionID: id, Type: lt.ActionInput,
		Status: status, TurnID: "turn_1", Question: "which one?", Summary: "answer a question", CreatedAt: b.tick()}
	s.actions = append(s.actions, a)
	s.sess.Status = lt.SessionRequiresAction
	b.appendLocked(id, lt.EventActionRequired, json.RawMessage(`{"action":{"id":"`+a.ID+`"}}`))
	return a
}

// journal returns a copy of the session's events.
func (b *treeBackend) journal(id string) []lt.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sessions[id].events)
}

// activeWatches counts the watches not stopped yet.
func (b *treeBackend) activeWatches() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, ws := range b.watchers {
		n += len(ws)
	}
	return n
}

func notFoundSession(id string) error { return apierror.NotFound("session %s not found", id) }

func (b *treeBackend) view(s *treeSession) lt.Session {
	v := s.sess
	v.LastEventSeq = int64(len(s.events))
	v.RequiredActions = []lt.Action{}
	for _, a := range s.actions {
		if a.Status == lt.ActionPending {
			v.RequiredActions = append(v.RequiredActions, a)
		}
	}
	return v
}

func (b *treeBackend) GetSession(_ context.Context, id string) (*lt.Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[id]
	if !ok {
		return nil, notFoundSession(id)
	}
	v := b.view(s)
	return &v, nil
}

// SessionList is the store's list (store.SessionLister), by parent only,
// newest first; the cursor is the id of the last session of the previous
// page.
func (b *treeBackend) SessionList(_ context.Context, p *store.SessionListParams) ([]*store.SessionRow, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*store.SessionRow
	started := p.Cursor == ""
	for i := len(b.order) - 1; i >= 0 && len(out) < p.Limit; i-- {
		s := b.sessions[b.order[i]]
		if !started {
			started = s.sess.ID == p.Cursor
			continue
		}
		if p.ParentID != "" && (s.sess.ParentID == nil || *s.sess.ParentID != p.ParentID) {
			continue
		}
		row := &store.SessionRow{ID: s.sess.ID, CreatedAt: s.sess.CreatedAt}
		if s.sess.ParentID != nil {
			row.ParentID = *s.sess.ParentID
		}
		out = append(out, row)
	}
	return out, nil
}

func (b *treeBackend) SessionTree(ctx context.Context, root string) ([]store.TreeMember, error) {
	members, err := store.WalkTree(ctx, b, root, engine.MaxTreeSessions)
	if err != nil {
		return nil, err
	}
	return members, nil
}

func (b *treeBackend) SessionChildren(ctx context.Context, id string, room int) ([]string, error) {
	ids, err := store.Children(ctx, b, id, room)
	if err != nil {
		return nil, err
	}
	return ids, nil
}

func (b *treeBackend) ListEvents(_ context.Context, id string, after int64, limit int) ([]lt.Event, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[id]
	if !ok {
		return nil, notFoundSession(id)
	}
	if after >= int64(len(s.events)) {
		return []lt.Event{}, nil
	}
	end := min(int(after)+limit, len(s.events))
	return slices.Clone(s.events[after:end]), nil
}

func (b *treeBackend) WatchSession(ctx context.Context, id string) (<-chan int64, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := make(chan int64, 1)
	if b.watchers[id] == nil {
		b.watchers[id] = make(map[chan int64]struct{})
	}
	b.watchers[id][w] = struct{}{}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			delete(b.watchers[id], w)
		})
	}
	unregister := context.AfterFunc(ctx, stop)
	return w, func() { unregister(); stop() }
}

func (b *treeBackend) ListActions(_ context.Context, id, status string) ([]lt.Action, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[id]
	if !ok {
		return nil, notFoundSession(id)
	}
	var out []lt.Action
	for _, a := range s.actions {
		if status == "" || string(a.Status) == status {
			out = append(out, a)
		}
	}
	return out, nil
}

// noIdempotency is an IdempotencyStore for servers whose tests post nothing.
type noIdempotency struct{}

func (noIdempotency) IdempotencyGet(context.Context, string, string) (*store.IdempotencyRow, error) {
	return nil, store.ErrNotFound
}

func (noIdempotency) IdempotencyPut(context.Context, *store.IdempotencyRow) error { return nil }

func (noIdempotency) IdempotencyClaim(context.Context, *store.IdempotencyClaim, time.Time) (*store.IdempotencyClaimResult, error) {
	return nil, errors.New("noIdempotency: the test posted with an Idempotency-Key")
}

func (noIdempotency) IdempotencyRenew(context.Context, string, string, string, time.Time) error {
	return nil
}

func (noIdempotency) IdempotencyRelease(context.Context, string, string, string, bool, time.Time) error {
	return nil
}

// treeService serves b over HTTP with the application's tree and stream
// use cases (app.Trees) reading b; the embedded nil Backend makes any other
// call panic, which fails the test.
type treeService struct {
	server.Backend
	b     *treeBackend
	trees *app.Trees
}

func (s *treeService) GetSession(ctx context.Context, id string) (*lt.Session, error) {
	return s.b.GetSession(ctx, id)
}

func (s *treeService) GetSessionTree(ctx context.Context, id string) (*lt.Session, error) {
	return s.trees.GetSessionTree(ctx, id)
}

func (s *treeService) ListActions(ctx context.Context, id string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	actions, err := s.b.ListActions(ctx, id, string(status))
	if err != nil {
		return nil, err
	}
	return &lt.List[lt.Action]{Data: append([]lt.Action{}, actions...)}, nil
}

func (s *treeService) ListTreeActions(ctx context.Context, id string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	return s.trees.ListTreeActions(ctx, id, status)
}

func (s *treeService) ListEvents(ctx context.Context, id string, after int64, limit int) (*lt.List[lt.Event], error) {
	events, err := s.b.ListEvents(ctx, id, after, limit)
	if err != nil {
		return nil, err
	}
	page := &lt.List[lt.Event]{Data: events}
	if len(events) == limit {
		next := strconv.FormatInt(events[len(events)-1].Seq, 10)
		page.NextCursor = &next
	}
	return page, nil
}

func (s *treeService) StreamEvents(ctx context.Context, id string, after int64) iter.Seq2[lt.Event, error] {
	return s.trees.StreamEvents(ctx, id, after)
}

func (s *treeService) StreamTreeEvents(ctx context.Context, id, cursor string) iter.Seq2[lt.TreeEvent, error] {
	return s.trees.StreamTreeEvents(ctx, id, cursor)
}

// newTreeHarness serves b with a fresh Server, as a harness whose helpers
// (get, openStream, …) work; it has no engine or store. ticker, if set,
// replaces the ping ticker; each of its ticks is also a poll of the
// streams (after the ping), so a test that ticks sees both.
func newTreeHarness(t *testing.T, b *treeBackend, ticker func(time.Duration) (<-chan time.Time, func())) *harness {
	t.Helper()
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	var poll func() (<-chan time.Time, func())
	if ticker != nil {
		polls := make(chan time.Time)
		poll = func() (<-chan time.Time, func()) { return polls, func() {} }
		ticker = pingThenPoll(ticker, polls)
	}
	svc := &treeService{b: b, trees: app.NewTrees(b, poll)}
	srv := server.New(svc, noIdempotency{}, &server.Config{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if ticker != nil {
		server.SetTicker(srv, ticker)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.RegisterOnShutdown(srv.Shutdown)
	ts.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		ts.Close()
	})
	return &harness{t: t, srv: srv, ts: ts, logs: logs}
}

// pingThenPoll returns a ticker whose ticks are ticker's, each of which it
// then sends on polls too, once the stream has taken the ping.
func pingThenPoll(ticker func(time.Duration) (<-chan time.Time, func()), polls chan<- time.Time) func(time.Duration) (<-chan time.Time, func()) {
	return func(d time.Duration) (<-chan time.Time, func()) {
		up, stop := ticker(d)
		pings := make(chan time.Time)
		quit := make(chan struct{})
		go func() {
			for {
				select {
				case at := <-up:
					select {
					case pings <- at:
					case <-quit:
						return
					}
					select {
					case polls <- at:
					case <-quit:
						return
					}
				case <-quit:
					return
				}
			}
		}()
		return pings, func() { close(quit); stop() }
	}
}

func TestGetSessionIncludeSubagents(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	c1 := b.create(root)
	g1 := b.create(c1)
	c2 := b.create(root)
	g2 := b.create(c1)
	a1 := b.addAction(c1, lt.ActionPending)
	ag := b.addAction(g1, lt.ActionPending)
	b.addAction(c2, lt.ActionResolved)
	h := newTreeHarness(t, b, nil)

	// Without include the session is as before: no subagents field.
	r := h.get("/v1/sessions/" + root)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), `"subagents"`)

	r = h.get("/v1/sessions/" + root + "?include=subagents")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	tree := decode[lt.Session](t, r)
	require.Equal(t, root, tree.ID)
	require.Equal(t, []string{c1, c2}, ids(tree.Subagents), "children oldest first")
	first := tree.Subagents[0]
	require.Equal(t, root, *first.ParentID)
	require.Equal(t, []string{g1, g2}, ids(first.Subagents), "grandchildren under their parent")
	require.Equal(t, []lt.Action{a1}, first.RequiredActions, "each session carries its pending actions")
	require.Equal(t, []lt.Action{ag}, first.Subagents[0].RequiredActions)
	require.Empty(t, first.Subagents[1].Subagents)
	require.Empty(t, tree.Subagents[1].RequiredActions, "a resolved action is not pending")
	require.Empty(t, tree.RequiredActions)

	// A sub-tree is served from any of its sessions; a leaf has none.
	sub := decode[lt.Session](t, h.get("/v1/sessions/"+c1+"?include=subagents"))
	require.Equal(t, []string{g1, g2}, ids(sub.Subagents))
	leaf := h.get("/v1/sessions/" + g2 + "?include=subagents")
	require.Equal(t, http.StatusOK, leaf.status)
	require.NotContains(t, string(leaf.body), `"subagents"`)

	// include is a comma-separated list of known values.
	require.Equal(t, http.StatusOK, h.get("/v1/sessions/"+root+"?include=subagents,%20subagents").status)
	e := requireError(t, h.get("/v1/sessions/"+root+"?include=children"), http.StatusBadRequest, "invalid_request", "include")
	require.Contains(t, e.Message, "subagents")
	requireError(t, h.get("/v1/sessions/"+root+"?include=subagents,"), http.StatusBadRequest, "invalid_request", "include")
	requireError(t, h.get("/v1/sessions/"+root+"?include=subagents&include=subagents"), http.StatusBadRequest, "invalid_request", "include")
	requireError(t, h.get("/v1/sessions/ses_missing?include=subagents"), http.StatusNotFound, "not_found", "")
}

func ids(sessions []lt.Session) []string {
	out := make([]string, len(sessions))
	for i, s := range sessions {
		out[i] = s.ID
	}
	return out
}

// countTree counts the sessions of a tree, its root included.
func countTree(s lt.Session) int {
	n := 1
	for _, c := range s.Subagents {
		n += countTree(c)
	}
	return n
}

func TestSessionTreeIsBounded(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	// 1,000 sessions in all, over three levels: the most served.
	var parents []string
	for range 9 {
		parents = append(parents, b.create(root))
	}
	for i := 0; b.count() < 1000; i++ {
		b.create(parents[i%len(parents)])
	}
	h := newTreeHarness(t, b, nil)

	r := h.get("/v1/sessions/" + root + "?include=subagents")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, 1000, countTree(decode[lt.Session](t, r)))
	all := decode[lt.List[lt.Action]](t, h.get("/v1/sessions/"+root+"/actions?include=subagents"))
	require.Empty(t, all.Data)

	// One more is refused, not cut: the error says why and what to do.
	b.create(parents[0])
	e := requireError(t, h.get("/v1/sessions/"+root+"?include=subagents"), http.StatusBadRequest, "invalid_request", "include")
	require.Contains(t, e.Message, "more than 1000 sessions")
	require.Contains(t, e.Message, "parent_id")
	requireError(t, h.get("/v1/sessions/"+root+"/actions?include=subagents"), http.StatusBadRequest, "invalid_request", "include")
	requireError(t, h.get("/v1/sessions/"+root+"/events/stream?include=subagents"), http.StatusBadRequest, "invalid_request", "include")
	// A sub-tree small enough is still served.
	require.Equal(t, http.StatusOK, h.get("/v1/sessions/"+parents[1]+"?include=subagents").status)
}

func (b *treeBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.order)
}

func TestListActionsIncludeSubagents(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	c1 := b.create(root)
	c2 := b.create(root)
	g1 := b.create(c1)
	// Created in this order, across the tree.
	want := []lt.Action{
		b.addAction(c2, lt.ActionPending),
		b.addAction(root, lt.ActionPending),
		b.addAction(g1, lt.ActionPending),
		b.addAction(c1, lt.ActionResolved),
		b.addAction(c1, lt.ActionPending),
	}
	h := newTreeHarness(t, b, nil)

	all := decode[lt.List[lt.Action]](t, h.get("/v1/sessions/"+root+"/actions?include=subagents"))
	require.Equal(t, want, all.Data, "every session's actions, by created_at, each naming its session")
	require.Nil(t, all.NextCursor)

	pending := decode[lt.List[lt.Action]](t, h.get("/v1/sessions/"+root+"/actions?status=pending&include=subagents"))
	require.Equal(t, []lt.Action{want[0], want[1], want[2], want[4]}, pending.Data)

	// A sub-tree, and the session alone without include.
	sub := decode[lt.List[lt.Action]](t, h.get("/v1/sessions/"+c1+"/actions?status=pending&include=subagents"))
	require.Equal(t, []lt.Action{want[2], want[4]}, sub.Data)
	only := decode[lt.List[lt.Action]](t, h.get("/v1/sessions/"+root+"/actions?status=pending"))
	require.Equal(t, []lt.Action{want[1]}, only.Data)
	empty := h.get("/v1/sessions/" + g1 + "/actions?status=resolved&include=subagents")
	require.JSONEq(t, `{"data": [], "next_cursor": null}`, string(empty.body))

	requireError(t, h.get("/v1/sessions/"+root+"/actions?include=everything"), http.StatusBadRequest, "invalid_request", "include")
	requireError(t, h.get("/v1/sessions/"+root+"/actions?status=open&include=subagents"), http.StatusBadRequest, "invalid_request", "status")
	requireError(t, h.get("/v1/sessions/ses_missing/actions?include=subagents"), http.StatusNotFound, "not_found", "")
}

func TestEventsListRefusesInclude(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	b.create(root)
	h := newTreeHarness(t, b, nil)
	for _, q := range []string{"include=subagents", "include=", "after=1&include=subagents"} {
		e := requireError(t, h.get("/v1/sessions/"+root+"/events?"+q), http.StatusBadRequest, "invalid_request", "include")
		require.True(t, strings.Contains(e.Message, "events/stream?include=subagents"), e.Message)
	}
	require.Equal(t, http.StatusOK, h.get("/v1/sessions/"+root+"/events").status)
}
