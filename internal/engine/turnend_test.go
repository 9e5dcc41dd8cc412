package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The end of a turn (turnend.go): a final answer is made durable with the
// end of its turn, in one append, when the runner's look at the session
// saw no other writer; a write that lands after that look makes the
// append fail, and the runner decides again on the newer journal.

// writeAfterLook is the runner's store: once armed (the model answered),
// the runner's next look at the session's last seq (the safe point of the
// tick that finds the final answer) is answered as the journal stood, and
// then another node writes to the session, once: the write lands between
// the runner's last look and the append that would end the turn.
type writeAfterLook struct {
	store.Store
	armed atomic.Bool
	once  sync.Once
	write func(sessionID string)
}

func (s *writeAfterLook) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	seq, err := s.Store.SessionLastSeq(ctx, id)
	if err == nil && s.armed.Load() {
		s.once.Do(func() { s.write(id) })
	}
	return seq, err
}

// armingProvider arms a store's hook once the model answered its first
// call.
type armingProvider struct {
	*gatedScripted
	armed *atomic.Bool
}

func (p armingProvider) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	resp, err := p.gatedScripted.Respond(ctx, req)
	p.armed.Store(true)
	return resp, err
}

// TestWriteBetweenTheLookAndTheTurnsEnd: a steer, a cancel or a follow-up
// turn journaled by another node right after the runner's last look at the
// session, as the model's final answer is about to end the turn. The
// answer is kept (never asked for again) and the write is acted on: the
// model reads the steer before the turn may end, the cancel ends the turn,
// the follow-up turn runs after it.
func TestWriteBetweenTheLookAndTheTurnsEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, api *engine.Engine, id string) error
		check func(t *testing.T, h *harness, s *lt.Session, reqs []*model.Request)
	}{
		{"steer", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.SteerSession(ctx, id, &lt.SteerRequest{Input: "Write it in English."})
			return err
		}, func(t *testing.T, h *harness, s *lt.Session, reqs []*model.Request) {
			require.Equal(t, lt.SessionIdle, s.Status)
			requireAnsweredAfterTheSteer(t, h, s.ID, reqs)
			require.Len(t, events(t, h, s.ID, lt.EventTurnCompleted), 1)
		}},
		{"cancel", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.CancelSession(ctx, id, &lt.CancelRequest{Reason: "enough"})
			return err
		}, func(t *testing.T, h *harness, s *lt.Session, reqs []*model.Request) {
			require.Equal(t, lt.SessionCancelled, s.Status)
			require.Len(t, reqs, 1)
			require.Len(t, events(t, h, s.ID, lt.EventModelResponded), 1, "the answer is journaled")
			require.Empty(t, events(t, h, s.ID, lt.EventTurnCompleted))
			require.Len(t, events(t, h, s.ID, lt.EventTurnCancelled), 1)
		}},
		{"follow-up turn", func(ctx context.Context, api *engine.Engine, id string) error {
			_, err := api.CreateTurn(ctx, id, &lt.CreateTurnRequest{Input: "and now in English"})
			return err
		}, func(t *testing.T, h *harness, s *lt.Session, reqs []*model.Request) {
			require.Equal(t, lt.SessionIdle, s.Status)
			require.Len(t, reqs, 2)
			require.Equal(t, user("and now in English"), reqs[1].Messages[len(reqs[1].Messages)-1])
			turns, err := h.eng.ListTurns(context.Background(), s.ID)
			require.NoError(t, err)
			require.Len(t, turns, 2)
			require.Equal(t, "the report, in French", turns[0].Output)
			require.Equal(t, "the report, in English", turns[1].Output)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newGatedScripted()
			p.open()
			hooked := &writeAfterLook{}
			h := newHarnessThrough(t, armingProvider{gatedScripted: p, armed: &hooked.armed}, 0, func(h *harness) store.Store {
				api := apiNode(t, h, p)
				hooked.Store = h.store
				hooked.write = func(id string) {
					require.NoError(t, tc.write(context.Background(), api, id))
				}
				return hooked
			})
			s := create(t, h, spec(t, `[{"text":"the report, in French"},{"text":"the report, in English"}]`), nil)
			s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionCancelled, lt.SessionFailed)
			// A follow-up turn's end may come after the first idle.
			if tc.name == "follow-up turn" {
				waitEvents(t, h, s.ID, lt.EventTurnCompleted, 2)
				s = h.waitStatus(s.ID, lt.SessionIdle)
			}
			require.True(t, hooked.armed.Load())
			tc.check(t, h, s, p.sent())
			checkJournal(t, h.store, s.ID)
		})
	}
}

// writesAroundLooks is the runner's store: once armed (the model
// answered), another node writes to the session just before the runner's
// first look at its last seq, which sees that write, and just after the
// second, which does not.
type writesAroundLooks struct {
	store.Store
	armed        atomic.Bool
	looks        atomic.Int64
	seen, unseen func(sessionID string)
}

func (s *writesAroundLooks) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	var look int64
	if s.armed.Load() {
		look = s.looks.Add(1)
	}
	if look == 1 {
		s.seen(id)
	}
	seq, err := s.Store.SessionLastSeq(ctx, id)
	if look == 2 {
		s.unseen(id)
	}
	return seq, err
}

// TestCancelAfterTheAnswersFlush: the look of the tick that finds the
// final answer saw another writer (a constraint pinned), so the answer is
// made durable first and the session read again (readSteers); a cancel
// journaled right after that read, before the end of the turn is durable,
// ends the turn cancelled, as it does when the answer shares the end's
// append (TestWriteBetweenTheLookAndTheTurnsEnd) and as it does before a
// verification call. Before, the end of the turn was merged onto the
// cancel: the turn completed, and the cancel its client got a 200 for
// (cancel_requested) came to nothing.
func TestCancelAfterTheAnswersFlush(t *testing.T) {
	hooked := &writesAroundLooks{}
	h, p := constraintFirstHarness(t, hooked, hooked, func(api *engine.Engine) {
		hooked.unseen = func(id string) {
			_, err := api.CancelSession(context.Background(), id, &lt.CancelRequest{Reason: "enough"})
			require.NoError(t, err)
		}
	})
	s := create(t, h, spec(t, `[{"text":"the report"}]`), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionCancelled, lt.SessionFailed)
	require.GreaterOrEqual(t, hooked.looks.Load(), int64(2), "both writes were made")
	require.Equal(t, lt.SessionCancelled, s.Status)
	require.Len(t, p.sent(), 1)
	require.Len(t, events(t, h, s.ID, lt.EventModelResponded), 1, "the answer is journaled")
	require.Empty(t, events(t, h, s.ID, lt.EventTurnCompleted))
	require.Len(t, events(t, h, s.ID, lt.EventTurnCancelled), 1)
	checkJournal(t, h.store, s.ID)
}

// appendRecorder records the runner's appends.
type appendRecorder struct {
	store.Store
	mu      sync.Mutex
	appends []*store.EventAppendParams
}

func (s *appendRecorder) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	s.mu.Lock()
	s.appends = append(s.appends, p)
	s.mu.Unlock()
	return s.Store.EventAppend(ctx, p)
}

// TestFinalAnswerEndsTheTurnInOneAppend: a session of two steps makes
// three writes: its creation with the first model request (createjoin.go,
// TestCreatedSessionWrittenWithItsFirstRequest), then two appends: the
// second request (carrying the first step), and the final answer with the
// end of its turn, which gives the lease back.
func TestFinalAnswerEndsTheTurnInOneAppend(t *testing.T) {
	p := newGatedScripted()
	p.open()
	var rec *appendRecorder
	// The creator waits for its runner however loaded the machine.
	h := newJoinHarness(t, p, time.Hour, func(h *harness) store.Store {
		rec = &appendRecorder{Store: h.store}
		return rec
	})
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`, lt.ToolSpec{Name: "list_files"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	checkJournal(t, h.store, s.ID)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.appends, 2)
	last := rec.appends[1]
	var types []string
	for _, ev := range last.Events {
		types = append(types, ev.Type)
	}
	require.Contains(t, types, lt.EventModelResponded, "the final answer")
	require.Equal(t, []string{lt.EventTurnCompleted, lt.EventCheckpointCreated, lt.EventSessionStatusChanged}, types[len(types)-3:])
	require.True(t, last.ReleaseLease, "the lease is given back with the end of the turn")
}

// lookCounter counts the looks at a session's last seq.
type lookCounter struct {
	store.Store
	looks atomic.Int64
}

func (s *lookCounter) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	s.looks.Add(1)
	return s.Store.SessionLastSeq(ctx, id)
}

// TestStepCheckpointTakesNoLook: a runner looks at the session's last seq
// (a round trip on PostgreSQL) before it runs a step's calls and when it
// finds the final answer, not before the checkpoint that ends a step nor
// before the model call after it (the request's conditional append is the
// check), nor, in a session created on its node, before the turn's first
// model call (firstRequestOnlyDue): a session of two tool steps and a
// final answer looks 2 + 1 times (4 with the first call's look). A call's
// watcher of controls also looks when its poll ticks (real time): under
// load a call outlasted a 10 ms tick and made it 7, so the poll waits an
// hour here (nothing is lost in one process: the hub tells the watcher).
func TestStepCheckpointTakesNoLook(t *testing.T) {
	p := newGatedScripted()
	p.open()
	counted := &lookCounter{}
	h := newHarnessPolling(t, p, 0, time.Hour, func(h *harness) store.Store {
		counted.Store = h.store
		return counted
	})
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"tool_calls":[{"name":"list_files","arguments":{"path":"."}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "list_files"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Len(t, events(t, h, s.ID, lt.EventCheckpointCreated), 3, "each step's, and the turn's")
	require.Equal(t, int64(3), counted.looks.Load())
	checkJournal(t, h.store, s.ID)
}

// snapshotLosingBackend opens the real local environments, the first
// snapshot of which reports that the environment went away.
type snapshotLosingBackend struct {
	environment.Backend
	lost atomic.Bool
}

func (b *snapshotLosingBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	env, err := b.Backend.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &snapshotLosingEnv{Environment: env, b: b}, nil
}

type snapshotLosingEnv struct {
	environment.Environment
	b *snapshotLosingBackend
}

func (e *snapshotLosingEnv) Snapshot(ctx context.Context) (string, snapshot.Stats, error) {
	if e.b.lost.CompareAndSwap(false, true) {
		return "", snapshot.Stats{}, errLinkClosed
	}
	return e.Environment.Snapshot(ctx)
}

// TestFinalAnswerKeptWhenTheTurnsCheckpointFails: the environment goes
// away as the turn's checkpoint snapshots it. The runner starts over with
// the environment opened again and ends the turn with the answer it had:
// the model is not asked again.
func TestFinalAnswerKeptWhenTheTurnsCheckpointFails(t *testing.T) {
	p := newGatedScripted()
	p.open()
	h := &harness{t: t, dir: t.TempDir(), clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)},
		providers: map[string]model.Provider{"scripted": p}}
	h.store = openStore(t, h.dir)
	t.Cleanup(func() { h.store.Close() })
	losing := &snapshotLosingBackend{}
	h.wrapEnvironments = func(b environment.Backend) environment.Backend {
		losing.Backend = b
		return losing
	}
	h.start("node-a")
	s := create(t, h, spec(t, `[{"text":"the only answer"}]`), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.True(t, losing.lost.Load(), "the turn's checkpoint met the loss")
	require.Equal(t, lt.SessionIdle, s.Status)
	require.Len(t, p.sent(), 1, "the answer was kept, not asked for again")
	turns, err := h.eng.ListTurns(context.Background(), s.ID)
	require.NoError(t, err)
	require.Len(t, turns, 1)
	require.Equal(t, "the only answer", turns[0].Output)
	checkJournal(t, h.store, s.ID)
}
