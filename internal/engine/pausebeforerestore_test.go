package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// pauseThenLoseBackend opens the real local environments. Once a command
// naming marker has run, the next check that the workspace holds the
// session's last snapshot (Holds: the step's checkpoint makes it) first
// asks for a pause through the engine's API, as a person would at that
// moment, then finds the workspace gone; it stays gone until a restore.
// So the pause lands between the call and its checkpoint, and that
// checkpoint finds the workspace lost.
type pauseThenLoseBackend struct {
	environment.Backend
	marker string
	pause  func(session string) error

	workspaceLoss
	runs     int   // runs of the command naming marker, replays included
	armed    bool  // the next Holds asks for the pause and loses
	pauseErr error // the pause's answer, read by the test
}

func (b *pauseThenLoseBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	env, err := b.Backend.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &pauseThenLoseEnv{Environment: env, b: b, session: p.Session}, nil
}

// ran reports how many times the command naming marker ran.
func (b *pauseThenLoseBackend) ran() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs
}

type pauseThenLoseEnv struct {
	environment.Environment
	b       *pauseThenLoseBackend
	session string
}

func (e *pauseThenLoseEnv) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	res, err := e.Environment.Run(ctx, req)
	if strings.Contains(req.Command, e.b.marker) {
		e.b.mu.Lock()
		e.b.runs++
		e.b.armed = e.b.runs == 1
		e.b.mu.Unlock()
	}
	return res, err
}

func (e *pauseThenLoseEnv) Holds(ctx context.Context, id string) (bool, error) {
	e.b.mu.Lock()
	ask := e.b.armed
	e.b.armed = false
	if ask {
		e.b.lost = true
	}
	e.b.mu.Unlock()
	if ask {
		// Synchronous: the request is durable before the runner goes on.
		err := e.b.pause(e.session)
		e.b.mu.Lock()
		e.b.pauseErr = err
		e.b.mu.Unlock()
	}
	return e.b.holds(ctx, e.Environment, id)
}

func (e *pauseThenLoseEnv) Restore(ctx context.Context, id string) (snapshot.Stats, error) {
	return e.b.restore(ctx, e.Environment, id)
}

// TestPauseBeforeRestoreAtStepCheckpoint: a pause asked for after a step's
// idempotent call ran, while the tick that takes only the step's
// checkpoint (no look at the session) finds the workspace lost, comes
// before the restore: the restore would run the call again, outside the
// journal, and nothing runs while paused, not even a recovery. The session
// pauses with the call run once and nothing restored; resumed, the
// workspace is restored then (the call replayed with its key) and the
// turn ends normally.
func TestPauseBeforeRestoreAtStepCheckpoint(t *testing.T) {
	b := &pauseThenLoseBackend{marker: "PAUSE_THEN_LOSE"}
	h := newWrappedHarness(t, func(local environment.Backend) environment.Backend {
		b.Backend = local
		return b
	})
	b.pause = func(session string) error {
		_, err := h.eng.PauseSession(context.Background(), session, &lt.PauseRequest{Reason: "lunch"})
		return err
	}
	// The first step's checkpoint has a snapshot: the loss at the
	// second's is restored from it.
	s := create(t, h, spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"a.md","content":"kept"}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo \"$LONGHAUL_IDEMPOTENCY_KEY\" >> ran.log; echo PAUSE_THEN_LOSE"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)

	s = h.waitStatus(s.ID, lt.SessionPaused)
	requireReleased(t, h, s.ID)
	b.mu.Lock()
	require.NoError(t, b.pauseErr)
	b.mu.Unlock()
	require.Equal(t, 1, b.ran(), "the call ran once: no restore replayed it before the pause")
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted, lt.EventToolCompleted), 4, "write_file and shell, started and completed once each")
	require.Len(t, events(t, h, s.ID, lt.EventSessionPauseRequested), 1)
	paused := events(t, h, s.ID, lt.EventSessionPaused)
	require.Len(t, paused, 1)
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentRestored), "nothing restored while paused")
	require.Less(t, seqOf(t, h, s.ID, lt.EventToolCompleted), paused[0].Seq)

	s = resume(t, h, s.ID)
	require.Equal(t, lt.SessionRunning, s.Status)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "done", mustTurnOutput(t, h, s))
	restored := events(t, h, s.ID, lt.EventEnvironmentRestored)
	require.Len(t, restored, 1, "the lost workspace is restored once resumed")
	require.Less(t, seqOf(t, h, s.ID, lt.EventSessionResumed), restored[0].Seq)
	require.Len(t, data[lt.EnvironmentRestoredData](t, restored[0]).Replayed, 1, "the shell call, replayed with its key")
	require.Equal(t, 2, b.ran(), "the call and its replay after the resume")
	require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 2, "a replay is no new call")
	require.Len(t, events(t, h, s.ID, lt.EventSessionPaused), 1)
	checkJournal(t, h.store, s.ID)
}

// TestCancelBeforeRestoreAtStepCheckpoint: as above with a cancel: it is
// read before the restore, which would run the step's idempotent call
// again after the cancel was answered; the session is cancelled with the
// call run once and nothing restored.
func TestCancelBeforeRestoreAtStepCheckpoint(t *testing.T) {
	b := &pauseThenLoseBackend{marker: "CANCEL_THEN_LOSE"}
	h := newWrappedHarness(t, func(local environment.Backend) environment.Backend {
		b.Backend = local
		return b
	})
	b.pause = func(session string) error {
		_, err := h.eng.CancelSession(context.Background(), session, &lt.CancelRequest{Reason: "enough"})
		return err
	}
	s := create(t, h, spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"a.md","content":"kept"}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo CANCEL_THEN_LOSE"}}]},
	  {"text":"never"}]`, lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)

	s = requireCancelled(t, h, s.ID)
	b.mu.Lock()
	require.NoError(t, b.pauseErr)
	b.mu.Unlock()
	require.Equal(t, 1, b.ran(), "the call ran once: no restore replayed it after the cancel")
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentRestored), "nothing restored for a cancelled turn")
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 2, "no model call after the cancel")
	checkJournal(t, h.store, s.ID)
}

// blockReplayBackend loses the workspace once a command naming marker has
// run (at the step's checkpoint, as above), and holds that command's
// replay (its second run) until its context ends, as a long replay would.
type blockReplayBackend struct {
	environment.Backend
	marker   string
	replayed chan struct{}

	workspaceLoss
	runs int
}

func (b *blockReplayBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	env, err := b.Backend.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &blockReplayEnv{Environment: env, b: b}, nil
}

type blockReplayEnv struct {
	environment.Environment
	b *blockReplayBackend
}

func (e *blockReplayEnv) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	if !strings.Contains(req.Command, e.b.marker) {
		return e.Environment.Run(ctx, req)
	}
	e.b.mu.Lock()
	e.b.runs++
	replay := e.b.runs > 1
	e.b.lost = !replay
	e.b.mu.Unlock()
	if replay {
		close(e.b.replayed)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return e.Environment.Run(ctx, req)
}

func (e *blockReplayEnv) Holds(ctx context.Context, id string) (bool, error) {
	return e.b.holds(ctx, e.Environment, id)
}

func (e *blockReplayEnv) Restore(ctx context.Context, id string) (snapshot.Stats, error) {
	return e.b.restore(ctx, e.Environment, id)
}

// workspaceLoss is a wrapped backend's workspace, lost (lost, under mu,
// which the backend's own counters share) until a restore succeeds.
type workspaceLoss struct {
	mu   sync.Mutex
	lost bool
}

// holds is env's Holds, false while the workspace is lost.
func (w *workspaceLoss) holds(ctx context.Context, env environment.Environment, id string) (bool, error) {
	w.mu.Lock()
	lost := w.lost
	w.mu.Unlock()
	if lost {
		return false, nil
	}
	return env.Holds(ctx, id)
}

// restore is env's Restore, which ends the loss when it succeeds.
func (w *workspaceLoss) restore(ctx context.Context, env environment.Environment, id string) (snapshot.Stats, error) {
	stats, err := env.Restore(ctx, id)
	if err == nil {
		w.mu.Lock()
		w.lost = false
		w.mu.Unlock()
	}
	return stats, err
}

// TestCancelCutsAReplay: a step's idempotent call is replayed with its key
// after the workspace was lost, and the replay runs long; a cancel cuts it
// as it would cut the call, and the session is cancelled. Before, the
// replay ran under the runner's own context, which a cancel does not end:
// the cancel waited for the replay's end (the tool's timeout).
func TestCancelCutsAReplay(t *testing.T) {
	b := &blockReplayBackend{marker: "REPLAY_BLOCKS", replayed: make(chan struct{})}
	h := newWrappedHarness(t, func(local environment.Backend) environment.Backend {
		b.Backend = local
		return b
	})
	s := create(t, h, spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"a.md","content":"kept"}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo REPLAY_BLOCKS"}}]},
	  {"text":"never"}]`, lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)
	select {
	case <-b.replayed:
	case <-time.After(20 * time.Second):
		t.Fatal("the call was not replayed")
	}
	cancelNow(t, h, s.ID)
	s = requireCancelled(t, h, s.ID)
	restored := events(t, h, s.ID, lt.EventEnvironmentRestored)
	require.Len(t, restored, 1)
	require.Len(t, data[lt.EnvironmentRestoredData](t, restored[0]).Missing, 1, "the replay cut: its changes are not back")
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), 2, "no model call after the cancel")
	checkJournal(t, h.store, s.ID)
}
