package engine_test

// A control answered in the instant before a runner's append that starts
// something (a model call, a tool call) or takes a pause: the append holds
// only on the journal the runner read, so the control comes first.

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestResumeBeforeThePauseTakesEffectIsKept: a pause is requested while
// a model call runs; as the worker journals session.paused at its safe
// point, a person's resume lands first (the API answers 200: the pause
// that had not taken effect is withdrawn). The worker's append conflicts,
// it merges its session.paused on top of the resume, and the session ends
// up paused: the acknowledged resume is lost.
func TestResumeBeforeThePauseTakesEffectIsKept(t *testing.T) {
	g := newGate()
	var h *harness
	var resumed atomic.Pointer[lt.Session]
	h = newHarnessConfigured(t, scripted.New(&scripted.Config{After: g.after}), func(h *harness) store.Store {
		return &onceBeforeAppend{Store: h.store,
			match: func(ev store.NewEvent) bool { return ev.Type == lt.EventSessionPaused },
			before: func(id string) {
				s, err := h.eng.ResumeSession(context.Background(), id, &lt.ResumeRequest{})
				if err != nil {
					t.Errorf("resume: %v", err)
					return
				}
				resumed.Store(s)
			}}
	}, func(*engine.Config) {})
	s := create(t, h, spec(t, `[{"delay_ms":1000,"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "list_files"}), nil)
	g.await(t)
	p := pauseNow(t, h, s.ID)
	require.True(t, p.PauseRequested)
	g.open(t)

	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := h.eng.GetSession(context.Background(), s.ID)
		require.NoError(t, err)
		if got.Status == lt.SessionIdle {
			break
		}
		if r := resumed.Load(); got.Status == lt.SessionPaused && r != nil {
			var types []string
			for _, ev := range events(t, h, s.ID) {
				types = append(types, ev.Type)
			}
			require.Failf(t, "resume lost", "the resume was answered (status %s, pause_requested %v) but the session is paused now; journal: %v",
				r.Status, r.PauseRequested, types)
		}
		require.False(t, time.Now().After(deadline), "status %s", got.Status)
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

// TestPauseReadAtAToolsStartHoldsIt: a pause is answered just before a
// worker's tool.started append (a non-read call); the append conflicts, the
// worker merges the pause request and runs the call all the same. A pause
// takes effect "at the next safe point ... before its next model or tool
// call starts" (pause.go): the call must wait for the resume, as a spawn
// read at the same point does (runSpawn).
func TestPauseReadAtAToolsStartHoldsIt(t *testing.T) {
	var h *harness
	var paused atomic.Bool
	h = newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
		return &onceBeforeAppend{Store: h.store,
			match: func(ev store.NewEvent) bool { return ev.Type == lt.EventToolStarted },
			before: func(id string) {
				s, err := h.eng.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "hold on"})
				if err != nil {
					t.Errorf("pause: %v", err)
					return
				}
				paused.Store(s.PauseRequested || s.Status == lt.SessionPaused)
			}}
	}, func(*engine.Config) {})
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo ran > ran.txt"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	s = h.waitStatus(s.ID, lt.SessionPaused, lt.SessionIdle)
	require.True(t, paused.Load(), "the pause was answered")
	pausedSeq := seqOf(t, h, s.ID, lt.EventSessionPaused)
	requestedSeq := seqOf(t, h, s.ID, lt.EventSessionPauseRequested)
	startedSeq := seqOf(t, h, s.ID, lt.EventToolStarted)
	ranSeq := seqOf(t, h, s.ID, lt.EventToolCompleted)
	t.Logf("pause_requested %d, tool.started %d, tool.completed %d, session.paused %d", requestedSeq, startedSeq, ranSeq, pausedSeq)
	require.True(t, ranSeq == 0 || ranSeq > pausedSeq,
		"the irreversible shell call ran after the pause was answered and before it took effect (pause_requested %d < tool.completed %d < session.paused %d)",
		requestedSeq, ranSeq, pausedSeq)
}

// armedBeforeAppend runs before, once, before the first append holding an
// event match accepts, after the test armed it.
type armedBeforeAppend struct {
	store.Store
	armed  atomic.Bool
	match  func(store.NewEvent) bool
	before func(sessionID string)
}

func (s *armedBeforeAppend) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	for _, ev := range p.Events {
		if s.match(ev) && s.armed.CompareAndSwap(true, false) {
			s.before(p.SessionID)
			break
		}
	}
	return s.Store.EventAppend(ctx, p)
}

// TestPauseReadAtAModelRequestHoldsIt: a verification call (the final
// answer is durable first, so the session is running): a pause answered
// just before its model.requested is appended is merged by that append,
// and the model is called all the same; the lookless step path
// (requestUnlooked) goes back to its tick instead and pauses.
func TestPauseReadAtAModelRequestHoldsIt(t *testing.T) {
	var h *harness
	var hook *armedBeforeAppend
	h = newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
		hook = &armedBeforeAppend{Store: h.store,
			match: func(ev store.NewEvent) bool {
				return ev.Type == lt.EventModelRequested && strings.Contains(string(ev.Data), lt.PurposeVerification)
			},
			before: func(id string) {
				if _, err := h.eng.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "hold on"}); err != nil {
					t.Errorf("pause: %v", err)
				}
			}}
		hook.armed.Store(true)
		return hook
	}, func(*engine.Config) {})
	s, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"text":"an answer"},{"text":"{\"criteria\":[{\"criterion\":\"is an answer\",\"met\":true,\"reason\":\"ok\"}]}"}]`),
		Input:     "go", AcceptanceCriteria: []string{"is an answer"},
	})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionPaused, lt.SessionIdle)
	evs := events(t, h, s.ID, lt.EventSessionPauseRequested, lt.EventModelRequested, lt.EventAcceptanceVerified, lt.EventSessionPaused)
	var order []string
	for _, ev := range evs {
		order = append(order, ev.Type)
	}
	t.Logf("status %s, order: %v", s.Status, order)
	require.Equal(t, 0, len(events(t, h, s.ID, lt.EventAcceptanceVerified)),
		"the verification call was made after the pause was answered, before it took effect: %v", order)
}

// steerThenControlAfterLookStore: before the first tool.started append a steer
// lands (no control: appendOrDrop looks, controlSince, and merges); right
// after that look, before the merge reads the session, a pause is answered.
type steerThenControlAfterLookStore struct {
	store.Store
	stage atomic.Int32
	steer func(id string)
	pause func(id string)
}

func (s *steerThenControlAfterLookStore) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if slices.ContainsFunc(p.Events, func(ev store.NewEvent) bool { return ev.Type == lt.EventToolStarted }) && s.stage.CompareAndSwap(0, 1) {
		s.steer(p.SessionID)
	}
	return s.Store.EventAppend(ctx, p)
}

func (s *steerThenControlAfterLookStore) EventList(ctx context.Context, id string, after int64, limit int) ([]store.Event, error) {
	evs, err := s.Store.EventList(ctx, id, after, limit)
	if limit == 1000 && s.stage.CompareAndSwap(1, 2) { // controlSince's look
		s.pause(id)
	}
	return evs, err
}

// steerThenControlAfterLook is a harness whose first tool.started append
// meets a steer, and whose look at what landed then meets control.
func steerThenControlAfterLook(t *testing.T, control func(h *harness, id string) error) *harness {
	var h *harness
	h = newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
		return &steerThenControlAfterLookStore{Store: h.store,
			steer: func(id string) {
				if _, err := h.eng.SteerSession(context.Background(), id, &lt.SteerRequest{Input: "a note"}); err != nil {
					t.Errorf("steer: %v", err)
				}
			},
			pause: func(id string) {
				if err := control(h, id); err != nil {
					t.Errorf("control: %v", err)
				}
			}}
	}, func(*engine.Config) {})
	return h
}

// TestPauseBetweenTheControlLookAndTheMerge: a steer lands before a
// call's tool.started (no control: merged, tried again), and a pause right
// after the runner looked at what landed: the merge reads the pause in, and
// the start is dropped rather than tried again.
func TestPauseBetweenTheControlLookAndTheMerge(t *testing.T) {
	h := steerThenControlAfterLook(t, func(h *harness, id string) error {
		_, err := h.eng.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "hold on"})
		return err
	})
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo ran > ran.txt"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}), nil)
	s = h.waitStatus(s.ID, lt.SessionPaused, lt.SessionIdle)
	requestedSeq := seqOf(t, h, s.ID, lt.EventSessionPauseRequested)
	pausedSeq := seqOf(t, h, s.ID, lt.EventSessionPaused)
	startedSeq := seqOf(t, h, s.ID, lt.EventToolStarted)
	ranSeq := seqOf(t, h, s.ID, lt.EventToolCompleted)
	t.Logf("status %s: pause_requested %d, tool.started %d, tool.completed %d, session.paused %d", s.Status, requestedSeq, startedSeq, ranSeq, pausedSeq)
	require.Positive(t, requestedSeq, "the pause was answered")
	require.True(t, ranSeq == 0 || ranSeq > pausedSeq,
		"the shell call started after the pause was answered (pause_requested %d < tool.started %d, tool.completed %d, session.paused %d)",
		requestedSeq, startedSeq, ranSeq, pausedSeq)
}

// TestPauseMergedByAFlushBeforeTheStart: a pause answered after the
// tick's look, merged by a plain flush on the way to a start (here the
// model monitor's review flushes the step's events before its call): the
// start's conditional append then has nothing to conflict with, and the
// monitor's model is called after the pause was answered.
func TestPauseMergedByAFlushBeforeTheStart(t *testing.T) {
	var h *harness
	h = newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store {
		return &onceBeforeAppend{Store: h.store,
			match: func(ev store.NewEvent) bool { return ev.Type == lt.EventToolRequested },
			before: func(id string) {
				if _, err := h.eng.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "hold on"}); err != nil {
					t.Errorf("pause: %v", err)
				}
			}}
	}, func(*engine.Config) {})
	marker := filepath.Join(t.TempDir(), "marker")
	sp := spec(t, calls(t, markerCall(marker)), irreversibleShell)
	sp.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, verdictStep("ok"))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionPaused, lt.SessionIdle, lt.SessionRequiresAction)
	requested := seqOf(t, h, s.ID, lt.EventSessionPauseRequested)
	paused := seqOf(t, h, s.ID, lt.EventSessionPaused)
	var monitorReq int64
	for _, ev := range events(t, h, s.ID, lt.EventModelRequested) {
		if data[lt.ModelRequestedData](t, ev).Purpose == lt.PurposeMonitor {
			monitorReq = ev.Seq
		}
	}
	t.Logf("status %s: pause_requested %d, monitor model.requested %d, session.paused %d\n%s", s.Status, requested, monitorReq, paused, journalText(t, h, s.ID))
	require.Positive(t, requested)
	require.False(t, monitorReq > requested && (paused == 0 || monitorReq < paused),
		"the monitor's model call was made after the pause was answered, before it took effect")
}

// twoWritesBeforeRequest: before the first append of a step's
// model.requested that also carries a context.compacted (the compaction's
// snapshot blob is in the batch, before the marks), another writer appends a
// steer (no control: merged, retried); before the retry, a pause (a
// control: the request is dropped with dropEnd(events, blobs)).
type twoWritesBeforeRequest struct {
	store.Store
	n      atomic.Int32
	first  func(id string)
	second func(id string)
}

func (s *twoWritesBeforeRequest) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	step := slices.ContainsFunc(p.Events, func(ev store.NewEvent) bool {
		return ev.Type == lt.EventModelRequested && !strings.Contains(string(ev.Data), `"purpose"`)
	})
	compacted := slices.ContainsFunc(p.Events, func(ev store.NewEvent) bool { return ev.Type == lt.EventContextCompacted })
	if step && compacted {
		switch s.n.Add(1) {
		case 1:
			s.first(p.SessionID)
		case 2:
			s.second(p.SessionID)
		}
	}
	return s.Store.EventAppend(ctx, p)
}

// TestDropAfterAMergeKeepsTheBlobsMarks: a step's request carried with a
// compaction (its snapshot blob in the batch, before the request) meets a
// steer (merged: the merge takes the snapshot out) and then a pause (the
// request dropped): the part dropped is counted from the batch's end.
// Before, the blobs were cut at the mark taken before the merge, past the
// slice's end, and the process panicked.
func TestDropAfterAMergeKeepsTheBlobsMarks(t *testing.T) {
	p := &planProvider{
		plan: []model.Response{call("list_files", `{}`), {Text: "first done"}, {Text: "second done"}},
		tooLong: func(msgs []model.Message) bool {
			if strings.Contains(systemText(msgs), "Summary of the earlier conversation") {
				return false
			}
			for _, m := range msgs {
				if strings.Contains(m.Text, "second input") {
					return true
				}
			}
			return false
		},
	}
	var h *harness
	var hook *twoWritesBeforeRequest
	h = newHarnessConfigured(t, p, func(h *harness) store.Store {
		hook = &twoWritesBeforeRequest{Store: h.store,
			first: func(id string) {
				if _, err := h.eng.SteerSession(context.Background(), id, &lt.SteerRequest{Input: "a note"}); err != nil {
					t.Errorf("steer: %v", err)
				}
			},
			second: func(id string) {
				if _, err := h.eng.PauseSession(context.Background(), id, &lt.PauseRequest{Reason: "hold on"}); err != nil {
					t.Errorf("pause: %v", err)
				}
			}}
		return hook
	}, func(*engine.Config) {})
	ctx := context.Background()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted"}, Tools: []lt.ToolSpec{{Name: "list_files"}}},
		Input:     "first input",
	})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "second input"})
	require.NoError(t, err)
	got := h.waitStatus(s.ID, lt.SessionPaused, lt.SessionIdle, lt.SessionFailed)
	t.Logf("hook fired %d times; status %s; journal:\n%s", hook.n.Load(), got.Status, journalText(t, h, s.ID))
	require.GreaterOrEqual(t, hook.n.Load(), int32(2), "both writes were made")
	require.Equal(t, lt.SessionPaused, got.Status)
}

// TestCancelBetweenTheControlLookAndTheMerge: as the pause above, a cancel
// read in by the merge of a steer drops the call's start, whatever its
// class. An irreversible call's own start, applied to the state before the
// append, made the cancel look held (journal.CancelHeld): its start was
// made durable after the cancel was answered, and a crash then would have
// left an effect in doubt that never ran.
func TestCancelBetweenTheControlLookAndTheMerge(t *testing.T) {
	for _, class := range []lt.EffectClass{lt.EffectIrreversible, lt.EffectIdempotent} {
		t.Run(string(class), func(t *testing.T) {
			h := steerThenControlAfterLook(t, func(h *harness, id string) error {
				_, err := h.eng.CancelSession(context.Background(), id, &lt.CancelRequest{Reason: "stop"})
				return err
			})
			marker := filepath.Join(t.TempDir(), "marker")
			s := create(t, h, spec(t, calls(t, markerCall(marker)), lt.ToolSpec{Name: "shell", Effect: class}), nil)
			s = requireCancelled(t, h, s.ID)
			cancelSeq := seqOf(t, h, s.ID, lt.EventSessionCancelRequested)
			require.Positive(t, cancelSeq)
			require.Zero(t, seqOf(t, h, s.ID, lt.EventToolStarted), "no start after the cancel was answered")
			require.NoFileExists(t, marker)
			effects, err := h.eng.ListEffects(context.Background(), s.ID)
			require.NoError(t, err)
			require.Empty(t, effects, "no effect in the ledger for a call that never started")
		})
	}
}
