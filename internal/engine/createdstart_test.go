package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// startReads counts, for each session, the engine's reads of the session's
// row before its first append after the creation, and its event lists; and
// holds the first look at a session (SessionLastSeq), while held, until
// let go.
type startReads struct {
	store.Store
	mu       sync.Mutex
	appended map[string]bool
	gets     map[string]int // before the first append
	looks    map[string]int // before the first append
	lists    map[string]int
	held     chan struct{} // closed to let the held look go; nil: not held
	looking  chan string   // a held look began (its session)
}

func newStartReads(st store.Store) *startReads {
	return &startReads{Store: st, appended: map[string]bool{}, gets: map[string]int{}, looks: map[string]int{}, lists: map[string]int{}}
}

func (s *startReads) SessionGet(ctx context.Context, id string) (*store.SessionRow, error) {
	s.mu.Lock()
	if !s.appended[id] {
		s.gets[id]++
	}
	s.mu.Unlock()
	return s.Store.SessionGet(ctx, id)
}

func (s *startReads) EventList(ctx context.Context, id string, afterSeq int64, limit int) ([]store.Event, error) {
	s.mu.Lock()
	s.lists[id]++
	s.mu.Unlock()
	return s.Store.EventList(ctx, id, afterSeq, limit)
}

// SessionCreate counts as the runner's first append when it is one: a
// leased creation with the first model request (createjoin.go).
func (s *startReads) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	evs, err := s.Store.SessionCreate(ctx, p)
	if p.Claim != nil && len(p.Events) > 0 && p.Events[len(p.Events)-1].Type == lt.EventModelRequested {
		s.mu.Lock()
		s.appended[p.Session.ID] = true
		s.mu.Unlock()
	}
	return evs, err
}

func (s *startReads) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	evs, err := s.Store.EventAppend(ctx, p)
	s.mu.Lock()
	s.appended[p.SessionID] = true
	s.mu.Unlock()
	return evs, err
}

func (s *startReads) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	s.mu.Lock()
	held, looking := s.held, s.looking
	s.held = nil // only the first look is held
	if !s.appended[id] {
		s.looks[id]++
	}
	s.mu.Unlock()
	if held != nil {
		looking <- id
		select {
		case <-held:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return s.Store.SessionLastSeq(ctx, id)
}

func (s *startReads) counts(id string) (gets, lists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[id], s.lists[id]
}

func (s *startReads) looksBeforeAppend(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.looks[id]
}

// waitRowStatus polls the session's row in st (not through the engine,
// whose reads the test counts) until its status is want.
func waitRowStatus(t *testing.T, st store.Store, id string, want ...lt.SessionStatus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		row, err := st.SessionGet(context.Background(), id)
		require.NoError(t, err)
		for _, w := range want {
			if lt.SessionStatus(row.Status) == w {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: status %s, want %v", id, row.Status, want)
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

// TestCreatedSessionRunsWithoutReadingItBack: the runner of a session
// created on its node with a lease starts from what the creation stored:
// it reads neither the session's row nor its events back.
func TestCreatedSessionRunsWithoutReadingItBack(t *testing.T) {
	p := newGatedScripted()
	p.open()
	var counted *startReads
	h := newHarnessThrough(t, p, 0, func(h *harness) store.Store {
		counted = newStartReads(h.store)
		return counted
	})
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "list_files"}), nil)
	waitRowStatus(t, h.store, s.ID, lt.SessionIdle)
	gets, lists := counted.counts(s.ID)
	require.Zero(t, gets, "the row read back before the runner's first append")
	require.Zero(t, lists, "the events read back")
	require.Zero(t, counted.looksBeforeAppend(s.ID), "a look before the turn's first model request")
	checkJournal(t, h.store, s.ID)
}

// TestWriteBeforeTheFirstLookOfACreatedSession: a cancel lands after the
// creation the runner starts from and before its first look (since
// firstRequestOnlyDue, the one before the turn may end, after the model's
// answer); the runner acts on it as on any write after its first read (as
// it did when it read the session back): the turn is cancelled, its model
// call at most started (a cancel cuts a call in flight, interrupt.go).
func TestWriteBeforeTheFirstLookOfACreatedSession(t *testing.T) {
	p := newGatedScripted()
	p.open()
	var counted *startReads
	held := make(chan struct{})
	h := newHarnessThrough(t, p, 0, func(h *harness) store.Store {
		counted = newStartReads(h.store)
		counted.held, counted.looking = held, make(chan string, 1)
		return counted
	})
	s := create(t, h, spec(t, `[{"text":"never asked"}]`), nil)
	cancelWhileHeld(t, h, s.ID, counted.looking, held, "look at the session")

	waitRowStatus(t, h.store, s.ID, lt.SessionIdle, lt.SessionCancelled)
	require.LessOrEqual(t, len(p.sent()), 1, "the model was asked again after the cancel")
	require.NotEmpty(t, events(t, h, s.ID, lt.EventTurnCancelled))
	checkJournal(t, h.store, s.ID)
}

// firstAppendHeld holds the first append of a lease holder (a runner's:
// the API's appends have no fence) until let go.
type firstAppendHeld struct {
	store.Store
	once      sync.Once
	appending chan string   // the held append began (its session)
	held      chan struct{} // closed to let it go
}

func (s *firstAppendHeld) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if p.Fence != nil {
		s.once.Do(func() {
			s.appending <- p.SessionID
			<-s.held
		})
	}
	return s.Store.EventAppend(ctx, p)
}

// TestWriteBeforeTheFirstRequestOfACreatedSession: the runner of a
// session created here takes no look before the turn's first model call
// (firstRequestOnlyDue). Its creator wrote the creation alone (the
// scheduler, in a claim that stalled, did not start the runner within
// createJoinWait: createjoin.go), so an API write can come between the
// creation and the runner's first append: a cancel that lands just before
// the append of the turn's start with the model's request makes that
// append fail: the request is dropped unsent and the turn cancelled, the
// model never asked. With a look before the request the same moment falls
// after the look, and the model was asked once.
func TestWriteBeforeTheFirstRequestOfACreatedSession(t *testing.T) {
	p := newGatedScripted()
	p.open()
	held := &firstAppendHeld{appending: make(chan string, 1), held: make(chan struct{})}
	claims := &heldClaims{}
	h := newHarnessThrough(t, p, 0, func(h *harness) store.Store {
		claims.Store = h.store
		held.Store = claims
		return held
	})
	claims.stall(t)
	s := create(t, h, spec(t, `[{"text":"never asked"}]`), nil)
	claims.letGo() // the runner starts, from the creation written alone
	cancelWhileHeld(t, h, s.ID, held.appending, held.held, "append")

	waitRowStatus(t, h.store, s.ID, lt.SessionIdle, lt.SessionCancelled)
	require.Empty(t, p.sent(), "the model was asked after the cancel")
	require.NotEmpty(t, events(t, h, s.ID, lt.EventTurnCancelled))
	require.Empty(t, events(t, h, s.ID, lt.EventModelRequested), "the dropped request is not in the journal")
	checkJournal(t, h.store, s.ID)
}

// cancelWhileHeld waits for the runner of session id to be held in a
// store call (began says which session's began; what names it), cancels
// the session, and lets the call go.
func cancelWhileHeld(t *testing.T, h *harness, id string, began <-chan string, held chan struct{}, what string) {
	t.Helper()
	select {
	case got := <-began:
		require.Equal(t, id, got)
	case <-time.After(10 * time.Second):
		t.Fatalf("the runner did not %s", what)
	}
	_, err := h.eng.CancelSession(context.Background(), id, &lt.CancelRequest{Reason: "changed my mind"})
	require.NoError(t, err)
	close(held)
}
