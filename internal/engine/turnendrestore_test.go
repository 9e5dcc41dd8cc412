package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A workspace lost at the end of a turn that a follow-up turn waits
// behind (turnend.go, checkpoint.go): the turn's checkpoint restores it,
// and an environment that says it does not hold the snapshot after the
// restore (a hostile or broken runner) makes the runner start over. That
// restore belongs to the turn that ends, before its end: never journaled
// with the end of the turn but without its checkpoint.

// unheldBackend opens the real local environments; once armed, their
// Holds answers that the environment does not hold what it is asked
// about, left times (negative: every time), then asks the real one.
type unheldBackend struct {
	environment.Backend

	armed atomic.Bool
	mu    sync.Mutex
	left  int
	said  int // the "does not hold" answers given
}

func (b *unheldBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	env, err := b.Backend.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &unheldEnv{Environment: env, b: b}, nil
}

// unheld reports whether this Holds is to answer false.
func (b *unheldBackend) unheld() bool {
	if !b.armed.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left == 0 {
		return false
	}
	b.left--
	b.said++
	return true
}

func (b *unheldBackend) answered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.said
}

type unheldEnv struct {
	environment.Environment
	b *unheldBackend
}

func (e *unheldEnv) Holds(ctx context.Context, id string) (bool, error) {
	if e.b.unheld() {
		return false, nil
	}
	return e.Environment.Holds(ctx, id)
}

// armAfter arms the backend once the model answered its n-th call.
type armAfter struct {
	*gatedScripted
	n       int
	backend *unheldBackend
	calls   atomic.Int32
}

func (p *armAfter) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	resp, err := p.gatedScripted.Respond(ctx, req)
	if p.calls.Add(1) == int32(p.n) {
		p.backend.armed.Store(true)
	}
	return resp, err
}

// TestWorkspaceUnheldAtTheEndOfATurnWithAFollowUp: turn 1 writes a file
// (its step checkpoint snapshots the workspace), a follow-up turn is
// queued meanwhile, and after the model's final answer the environment
// says it does not hold the snapshot, before and after the restore. The
// server does not crash; the answer is journaled once and never asked for
// again; environment.lost is filed under turn 1; every turn.completed is
// followed by its turn's checkpoint. When the environment holds the
// snapshot again the session completes both turns; when it never does,
// the restores are bounded (maxRestoreAttempts, counted across the
// runner's fresh starts), turn 1 fails with sandbox_error, and the
// follow-up turn runs after it.
func TestWorkspaceUnheldAtTheEndOfATurnWithAFollowUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		left  int // Holds answers "not held" (negative: always)
		check func(t *testing.T, h *harness, s *lt.Session, turns []lt.Turn, lost []lt.Event)
	}{
		{"holds again", 2, func(t *testing.T, h *harness, s *lt.Session, turns []lt.Turn, lost []lt.Event) {
			require.Len(t, lost, 1, "one restore, found not held")
			require.Len(t, turns, 2)
			require.Equal(t, lt.TurnCompleted, turns[0].Status)
			require.Equal(t, "the first answer", turns[0].Output)
			require.Equal(t, lt.TurnCompleted, turns[1].Status)
			require.Equal(t, "the second answer", turns[1].Output)
			require.Len(t, events(t, h, s.ID, lt.EventTurnCompleted), 2)
		}},
		{"never holds", -1, func(t *testing.T, h *harness, s *lt.Session, turns []lt.Turn, lost []lt.Event) {
			require.Len(t, lost, 3, "maxRestoreAttempts restores, then no more")
			require.Contains(t, data[lt.EnvironmentLostData](t, lost[2]).Reason, "restore 3 of at most 3")
			require.Len(t, turns, 2)
			require.Equal(t, lt.TurnFailed, turns[0].Status)
			require.Contains(t, turns[0].Error, "could not be brought back")
			failed := events(t, h, s.ID, lt.EventTurnFailed)
			require.Len(t, failed, 1)
			d := data[lt.TurnFailedData](t, failed[0])
			require.Equal(t, turns[0].ID, d.TurnID)
			require.Equal(t, lt.StopSandboxError, d.StopReason)
			// The follow-up turn then runs (a new turn tries again).
			require.Equal(t, lt.TurnCompleted, turns[1].Status)
			require.Equal(t, "the second answer", turns[1].Output)
			completed := events(t, h, s.ID, lt.EventTurnCompleted)
			require.Len(t, completed, 1)
			require.Equal(t, turns[1].ID, completed[0].TurnID, "turn 1 never ended as completed")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unheld := &unheldBackend{left: tc.left}
			p := newGatedScripted()
			t.Cleanup(p.open)
			armed := &armAfter{gatedScripted: p, n: 2, backend: unheld}
			h := &harness{t: t, dir: t.TempDir(), clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)},
				providers: map[string]model.Provider{"scripted": armed}}
			h.store = openStore(t, h.dir)
			t.Cleanup(func() { h.store.Close() })
			h.wrapEnvironments = func(b environment.Backend) environment.Backend {
				unheld.Backend = b
				return unheld
			}
			h.start("node-a")

			// The first model call waits on the gate while the follow-up
			// turn is queued.
			s := create(t, h, spec(t, `[
			  {"delay_ms":60000,"tool_calls":[{"name":"write_file","arguments":{"path":"a.md","content":"kept"}}]},
			  {"text":"the first answer"},
			  {"text":"the second answer"}]`, lt.ToolSpec{Name: "write_file"}), nil)
			waitEvent(t, h, s.ID, lt.EventModelRequested)
			_, err := h.eng.CreateTurn(context.Background(), s.ID, &lt.CreateTurnRequest{Input: "and now the second"})
			require.NoError(t, err)
			p.open()

			// Idle before the follow-up turn starts, and after it ends.
			waitEvents(t, h, s.ID, lt.EventTurnStarted, 2)
			s = h.waitStatus(s.ID, lt.SessionIdle)
			require.True(t, unheld.armed.Load())
			require.GreaterOrEqual(t, unheld.answered(), 2, "the environment said it did not hold the snapshot, before and after a restore")

			turns, err := h.eng.ListTurns(context.Background(), s.ID)
			require.NoError(t, err)
			first := turns[0].ID

			all := events(t, h, s.ID)
			var answers int
			for i, ev := range all {
				switch ev.Type {
				case lt.EventModelResponded:
					if data[lt.ModelRespondedData](t, ev).Text == "the first answer" {
						answers++
					}
				case lt.EventTurnCompleted:
					// Never an end made durable without its checkpoint.
					require.Less(t, i+1, len(all), "turn.completed is the last event")
					next := all[i+1]
					require.Equal(t, lt.EventCheckpointCreated, next.Type, "turn.completed (seq %d) followed by %s", ev.Seq, next.Type)
					ck := data[lt.CheckpointCreatedData](t, next).Checkpoint
					require.Equal(t, lt.CheckpointTurn, ck.Kind)
					require.Equal(t, ev.TurnID, ck.TurnID)
				}
			}
			require.Equal(t, 1, answers, "the first turn's answer is journaled once")
			require.Len(t, p.sent(), 3, "the first answer is never asked for again")

			lost := events(t, h, s.ID, lt.EventEnvironmentLost)
			for _, ev := range lost {
				require.Equal(t, first, ev.TurnID, "environment.lost (seq %d) filed under the turn that was current", ev.Seq)
			}
			tc.check(t, h, s, turns, lost)
			checkJournal(t, h.store, s.ID)
		})
	}
}
