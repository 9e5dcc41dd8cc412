package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// runnerBackend stands for the node's router with one runner, "box1"
// (labels gpu): while it is not connected, an environment that asks for a
// runner is ErrUnavailable; once it is, the environment opens (the real
// local one: the runner's machine is this one) and says it lives on box1.
type runnerBackend struct {
	environment.Backend
	connected atomic.Bool
	opens     atomic.Int32
	// live counts its environments opened and not closed yet.
	live atomic.Int32
	// key is the id of the key box1 is connected with now ("": key1).
	key atomic.Value
	// refuseSubagents: a sub-agent's opens find no runner.
	refuseSubagents atomic.Bool
	// full: box1 is connected but at its capacity.
	full atomic.Bool
	// dropOn: the first command containing it finds the runner gone
	// (ErrUnavailable, nothing ran), which disconnects it.
	dropOn  string
	dropped atomic.Bool
	// loseStopReply: the next Stop stops the environment (its workspace
	// removed), then the runner's connection breaks before the reply
	// (ErrLost), which disconnects it.
	loseStopReply atomic.Bool
	// elsewhere: box1 is connected to another node (node-b), not this
	// one (environment.ElsewhereError, as the router answers).
	elsewhere atomic.Bool
	// dropMarker: the next person's change marker box1 is asked to
	// record (Record, or with the change: WriteFileIf, RemoveIf) is not
	// kept, though it answers that it is (a runner that lost it, or
	// lies).
	dropMarker atomic.Bool
	// beforeChange, when set, runs with the path of a person's change
	// right before the change reaches the workspace (WriteFileIf,
	// RemoveIf): a program of the environment writing meanwhile, or the
	// runner failing the change (its error, returned instead).
	beforeChange atomic.Pointer[func(rel string) error]
	// holdList, when set, holds a List (a person's listing) until its
	// release is closed, its entered closed once it is in.
	holdList atomic.Pointer[heldCall]
	// stops counts the Stop calls made.
	stops atomic.Int32
	// afterBusyStop, when set, runs once after a Stop refused as busy,
	// before the refusal is returned (a person's read ending meanwhile).
	afterBusyStop atomic.Pointer[func()]
}

// heldCall is a call held in the middle (runnerBackend.holdList).
type heldCall struct{ entered, release chan struct{} }

func (e *onRunner) List(ctx context.Context, rel string, max int) (*workspace.Listing, error) {
	if h := e.b.holdList.Swap(nil); h != nil {
		close(h.entered)
		<-h.release
	}
	return e.Environment.List(ctx, rel, max)
}

func (b *runnerBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	if p.Runner == nil {
		return b.Backend.Open(ctx, p)
	}
	b.opens.Add(1)
	if b.elsewhere.Load() {
		return nil, &environment.ElsewhereError{Node: "node-b", Runner: "box1", Session: p.Session}
	}
	if b.full.Load() && !(p.ForStop && p.Pinned == "box1") {
		// An open to stop a pinned environment takes no slot (the
		// router's exemption).
		return nil, fmt.Errorf("open environment of session %s: runner box1: %w", p.Session, environment.ErrFull)
	}
	if b.connected.Load() && p.Pinned == "box1" && p.PinnedKey != "" && p.PinnedKey != b.keyID() {
		return nil, fmt.Errorf("open environment of session %s: runner box1: %w", p.Session, environment.ErrPinnedKeyChanged)
	}
	if !b.connected.Load() || !p.Runner.Matches("box1", []string{"gpu"}) || (p.Pinned != "" && p.Pinned != "box1") ||
		(b.refuseSubagents.Load() && p.Workspace != p.Session) {
		return nil, fmt.Errorf("open environment of session %s: %w (no matching runner is connected)", p.Session, environment.ErrUnavailable)
	}
	local := *p
	local.Runner, local.Pinned = nil, ""
	env, err := b.Backend.Open(ctx, &local)
	if err != nil {
		return nil, err
	}
	b.live.Add(1)
	return &onRunner{Environment: env, b: b, key: b.keyID(), closed: sync.OnceFunc(func() { b.live.Add(-1) })}, nil
}

func (b *runnerBackend) keyID() string {
	if k, _ := b.key.Load().(string); k != "" {
		return k
	}
	return "key1"
}

type onRunner struct {
	environment.Environment
	b      *runnerBackend
	key    string
	closed func()
}

func (e *onRunner) Close() error {
	defer e.closed()
	return e.Environment.Close()
}

func (e *onRunner) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	if e.b.dropOn != "" && strings.Contains(req.Command, e.b.dropOn) && e.b.dropped.CompareAndSwap(false, true) {
		e.b.connected.Store(false)
		return nil, fmt.Errorf("runner box1: %w (disconnected)", environment.ErrUnavailable)
	}
	return e.Environment.Run(ctx, req)
}

func (e *onRunner) WriteFileIf(ctx context.Context, rel string, data []byte, c environment.Condition) error {
	if f := e.b.beforeChange.Load(); f != nil {
		if err := (*f)(rel); err != nil {
			return err
		}
	}
	return e.Environment.WriteFileIf(ctx, rel, data, e.dropMarker(c))
}

// dropMarker is c without its marker when the next change's marker is to
// be dropped (runnerBackend.dropMarker): made, but the marker not kept.
func (e *onRunner) dropMarker(c environment.Condition) environment.Condition {
	if strings.HasPrefix(c.Marker, "change-") && e.b.dropMarker.CompareAndSwap(true, false) {
		c.Marker = ""
	}
	return c
}

func (e *onRunner) RemoveIf(ctx context.Context, rel string, c environment.Condition) error {
	if f := e.b.beforeChange.Load(); f != nil {
		if err := (*f)(rel); err != nil {
			return err
		}
	}
	return e.Environment.RemoveIf(ctx, rel, e.dropMarker(c))
}

func (e *onRunner) Stop(ctx context.Context, id string) error {
	e.b.stops.Add(1)
	err := e.Environment.Stop(ctx, id)
	if errors.Is(err, environment.ErrBusy) {
		if f := e.b.afterBusyStop.Swap(nil); f != nil {
			(*f)()
		}
	}
	if err != nil || !e.b.loseStopReply.CompareAndSwap(true, false) {
		return err
	}
	e.b.connected.Store(false)
	return fmt.Errorf("runner box1: %w (connection closed)", environment.ErrLost)
}

func (e *onRunner) Record(ctx context.Context, id string) error {
	if strings.HasPrefix(id, "change-") && e.b.dropMarker.CompareAndSwap(true, false) {
		return nil
	}
	return e.Environment.Record(ctx, id)
}

func (e *onRunner) Info() environment.Info {
	i := e.Environment.Info()
	i.Runner, i.RunnerKey = "box1", e.key
	return i
}

func newRunnerHarness(t *testing.T, dropOn ...string) (*harness, *runnerBackend) {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	rb := &runnerBackend{}
	if len(dropOn) > 0 {
		rb.dropOn = dropOn[0]
	}
	h.wrapEnvironments = func(b environment.Backend) environment.Backend {
		rb.Backend = b
		return rb
	}
	h.start("node-a")
	return h, rb
}

func onGPU(sp *lt.AgentSpec) *lt.AgentSpec {
	sp.Environment = &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"gpu"}}}
	return sp
}

func pendingEnvAction(t *testing.T, h *harness, id string) lt.Action {
	t.Helper()
	acts, err := h.eng.ListActions(context.Background(), id, string(lt.ActionPending))
	require.NoError(t, err)
	require.Len(t, acts, 1)
	require.Equal(t, lt.ActionEnvironmentConnection, acts[0].Type)
	return acts[0]
}

// TestEnvironmentConnectionResolvesWhenARunnerConnects: no matching runner
// → the session parks in requires_action with an environment_connection
// action (nothing ran); a runner that does not match wakes nothing; a
// matching one resolves it (journaled) and the session runs on it, pinned
// (environment.opened).
func TestEnvironmentConnectionResolvesWhenARunnerConnects(t *testing.T) {
	h, rb := newRunnerHarness(t)
	ctx := context.Background()
	s := create(t, h, onGPU(spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo ran > ran.txt"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"})), nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	a := pendingEnvAction(t, h, s.ID)
	require.Equal(t, &lt.RunnerSelector{Labels: []string{"gpu"}}, a.Runner)
	require.Contains(t, a.Reason, "no matching runner is connected")
	require.Contains(t, a.Summary, "labels gpu")
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted, lt.EventModelRequested), "nothing ran")

	inbox, err := h.eng.ListAllActions(ctx, lt.ListActionsParams{Type: string(lt.ActionEnvironmentConnection), Status: string(lt.ActionPending)})
	require.NoError(t, err)
	require.Len(t, inbox.Data, 1, "the inbox lists it by type")

	woke, err := h.eng.RunnerConnected(ctx, lt.DefaultProject, "box2", "key1", []string{"linux"})
	require.NoError(t, err)
	require.Zero(t, woke, "a runner without the label")
	woke, err = h.eng.RunnerConnected(ctx, "other-project", "box1", "key1", []string{"gpu"})
	require.NoError(t, err)
	require.Zero(t, woke, "another project's runner")

	rb.connected.Store(true)
	woke, err = h.eng.RunnerConnected(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu", "linux"})
	require.NoError(t, err)
	require.Equal(t, 1, woke)
	h.waitStatus(s.ID, lt.SessionIdle)

	resolved := events(t, h, s.ID, lt.EventActionResolved)
	require.Len(t, resolved, 1)
	d := data[lt.ActionResolvedData](t, resolved[0])
	require.Equal(t, lt.DecisionConnected, d.Decision.Decision)
	require.Equal(t, "runner box1 connected", d.Decision.Reason)
	opened := events(t, h, s.ID, lt.EventEnvironmentOpened)
	require.Len(t, opened, 1)
	require.Equal(t, "box1", data[lt.EnvironmentOpenedData](t, opened[0]).Runner)
	require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1)
	checkJournal(t, h.store, s.ID)

	// A follow-up turn goes back to box1 (pinned); with box1 gone it
	// waits for box1, not for any gpu runner.
	rb.connected.Store(false)
	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	a = pendingEnvAction(t, h, s.ID)
	require.Contains(t, a.Summary, "runner box1, which is not connected")
	woke, err = h.eng.RunnerConnected(ctx, lt.DefaultProject, "box3", "key1", []string{"gpu"})
	require.NoError(t, err)
	require.Zero(t, woke, "another gpu runner: the workspace lives on box1")

	// box1 comes back with other labels: the session is woken all the
	// same (its environment lives there) and goes on.
	rb.connected.Store(true)
	woke, err = h.eng.RunnerConnected(ctx, lt.DefaultProject, "box1", "key1", []string{"linux"})
	require.NoError(t, err)
	require.Equal(t, 1, woke, "the pinned runner, whatever its labels now")
	h.waitStatus(s.ID, lt.SessionIdle)
	checkJournal(t, h.store, s.ID)
}

// TestEnvironmentConnectionStop: the application's stop ends the turn;
// any other decision is refused, saying why.
func TestEnvironmentConnectionStop(t *testing.T) {
	h, _ := newRunnerHarness(t)
	ctx := context.Background()
	s := create(t, h, onGPU(spec(t, `[{"text":"never"}]`)), nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	a := pendingEnvAction(t, h, s.ID)

	_, err := h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionApprove})
	requireAPIError(t, err, lt.CodeInvalidRequest, "resolves by itself when a matching runner connects")
	_, err = h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionConnected})
	requireAPIError(t, err, lt.CodeInvalidRequest, "must be stop")
	_, err = h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionStop, Answer: "x"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "takes only decision stop")

	decided, err := h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionStop, Reason: "no gpu today"})
	require.NoError(t, err)
	require.Equal(t, lt.ActionResolved, decided.Status)
	got := h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopStopped, *got.StopReason)
	failed := events(t, h, s.ID, lt.EventTurnFailed)
	require.Len(t, failed, 1)
	require.Contains(t, data[lt.TurnFailedData](t, failed[0]).Error, "no gpu today")
	require.Empty(t, events(t, h, s.ID, lt.EventModelRequested), "nothing ran")
	checkJournal(t, h.store, s.ID)
}

// TestRunnerGoneBetweenCalls: the runner goes away after the environment
// opened, and a call finds it unreachable (nothing ran). An idempotent
// call stays started, the session waits for a runner, and the call runs
// once (with its key) when one connects. An irreversible one fails,
// saying nothing ran, and the session waits for a runner before its next
// step.
func TestRunnerGoneBetweenCalls(t *testing.T) {
	for _, effect := range []lt.EffectClass{lt.EffectIdempotent, lt.EffectIrreversible} {
		t.Run(string(effect), func(t *testing.T) {
			h, rb := newRunnerHarness(t, "DROP")
			rb.connected.Store(true)
			ctx := context.Background()
			s := create(t, h, onGPU(spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo \"$LONGHAUL_IDEMPOTENCY_KEY\" >> ran.log # DROP"}}]},{"text":"done"}]`,
				lt.ToolSpec{Name: "shell", Effect: effect})), nil)
			h.waitStatus(s.ID, lt.SessionRequiresAction)
			pendingEnvAction(t, h, s.ID)
			require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted, lt.EventEffectInDoubt))
			_, err := os.Stat(filepath.Join(h.dir, "workspaces", s.ID, "ran.log"))
			require.ErrorIs(t, err, os.ErrNotExist, "nothing ran")

			rb.connected.Store(true)
			woke, err := h.eng.RunnerConnected(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"})
			require.NoError(t, err)
			require.Equal(t, 1, woke)
			h.waitStatus(s.ID, lt.SessionIdle)
			started := events(t, h, s.ID, lt.EventToolStarted)
			if effect == lt.EffectIrreversible {
				require.Len(t, started, 1)
				failed := events(t, h, s.ID, lt.EventToolFailed)
				require.Len(t, failed, 1)
				require.Contains(t, data[lt.ToolFailedData](t, failed[0]).Error, "nothing ran")
				require.Empty(t, events(t, h, s.ID, lt.EventEffectInDoubt), "nothing ran: not in doubt")
			} else {
				require.Len(t, started, 2, "the attempt that found no runner and the one after")
				first, second := data[lt.ToolStartedData](t, started[0]), data[lt.ToolStartedData](t, started[1])
				require.Equal(t, first.IdempotencyKey, second.IdempotencyKey)
				log, err := os.ReadFile(filepath.Join(h.dir, "workspaces", s.ID, "ran.log"))
				require.NoError(t, err)
				require.Equal(t, first.IdempotencyKey+"\n", string(log), "it ran once, with its key")
			}
			checkJournal(t, h.store, s.ID)
		})
	}
}

// TestPinnedRunnerNameTakenByAnotherKey: a session's pin is its runner's
// name and the key it connected with. Another key of the project that
// takes the name once its holder left neither wakes the session nor gets
// its environment; the holder's key coming back does.
func TestPinnedRunnerNameTakenByAnotherKey(t *testing.T) {
	h, rb := newRunnerHarness(t)
	rb.connected.Store(true)
	ctx := context.Background()
	s := create(t, h, onGPU(spec(t, `[{"text":"first"},{"tool_calls":[{"name":"shell","arguments":{"command":"echo ran > ran.txt"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"})), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	opened := events(t, h, s.ID, lt.EventEnvironmentOpened)
	require.Len(t, opened, 1)
	require.Equal(t, lt.EnvironmentOpenedData{Runner: "box1", RunnerKeyID: "key1", Provisioned: true}, data[lt.EnvironmentOpenedData](t, opened[0]))

	// box1's holder leaves; another key of the project connects as box1.
	rb.key.Store("key2")
	_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	pendingEnvAction(t, h, s.ID)
	woke, err := h.eng.RunnerConnected(ctx, lt.DefaultProject, "box1", "key2", []string{"gpu"})
	require.NoError(t, err)
	require.Zero(t, woke, "the name held by another key is not the session's runner")
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted), "nothing ran on the other key's runner")

	rb.key.Store("key1")
	woke, err = h.eng.RunnerConnected(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"})
	require.NoError(t, err)
	require.Equal(t, 1, woke)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1)
	checkJournal(t, h.store, s.ID)
}

// TestUnpinLetsAReplacedKeyTakeTheSession: a session pinned to box1 of
// key1 waits when box1 connects with key2 (its key revoked and replaced,
// or another key that took the name), and the action says so; only a
// person's unpin lets key2's box1 take it: the session goes on there,
// pinned anew to key2. An unpin of a session pinned to nothing is a 409.
func TestUnpinLetsAReplacedKeyTakeTheSession(t *testing.T) {
	h, rb := newRunnerHarness(t)
	ctx := context.Background()
	never := create(t, h, onGPU(spec(t, `[{"text":"never"}]`)), nil)
	h.waitStatus(never.ID, lt.SessionRequiresAction)
	na := pendingEnvAction(t, h, never.ID)
	_, err := h.eng.DecideAction(ctx, never.ID, na.ID, &lt.Decision{Decision: lt.DecisionUnpin})
	requireAPIError(t, err, lt.CodeConflict, "pinned to no runner")
	_, err = h.eng.DecideAction(ctx, never.ID, na.ID, &lt.Decision{Decision: lt.DecisionStop})
	require.NoError(t, err)

	rb.connected.Store(true)
	s := create(t, h, onGPU(spec(t, `[{"text":"first"},{"tool_calls":[{"name":"shell","arguments":{"command":"echo ran > ran.txt"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "shell"})), nil)
	h.waitStatus(s.ID, lt.SessionIdle)

	rb.key.Store("key2")
	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	a := pendingEnvAction(t, h, s.ID)
	require.Contains(t, a.Summary, "held by another key")
	require.Contains(t, a.Summary, "decide unpin")
	require.Contains(t, a.Reason, "held by another key")
	woke, err := h.eng.RunnerConnected(ctx, lt.DefaultProject, "box1", "key2", []string{"gpu"})
	require.NoError(t, err)
	require.Zero(t, woke)
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted), "nothing ran on key2's runner before the decision")

	_, err = h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionUnpin, Reason: "box1's key was replaced"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1)
	opened := events(t, h, s.ID, lt.EventEnvironmentOpened)
	require.Equal(t, lt.EnvironmentOpenedData{Runner: "box1", RunnerKeyID: "key2"}, data[lt.EnvironmentOpenedData](t, opened[len(opened)-1]),
		"pinned anew, to the key that took it")
	checkJournal(t, h.store, s.ID)
}

// TestSubagentWokenByItsRootsRunner: a sub-agent's environment is its
// root's, on the root's runner: a sub-agent waiting for a runner is woken
// by that runner only (as its open goes), not by another that matches
// the selector.
func TestSubagentWokenByItsRootsRunner(t *testing.T) {
	h, rb := newRunnerHarness(t)
	rb.connected.Store(true)
	rb.refuseSubagents.Store(true)
	ctx := context.Background()
	child := childSpec(script(t, map[string]any{"text": "child done"}))
	parent := onGPU(spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "go"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "all done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}))
	s := create(t, h, parent, nil)
	var kid string
	require.Eventually(t, func() bool {
		kids := children(t, h, s.ID)
		if len(kids) == 1 {
			kid = kids[0].ID
		}
		return kid != ""
	}, 10*time.Second, time.Millisecond)
	h.waitStatus(kid, lt.SessionRequiresAction)
	pendingEnvAction(t, h, kid)
	require.Equal(t, "box1", h.state(s.ID).EnvironmentRunner)
	require.Empty(t, h.state(kid).EnvironmentRunner, "the sub-agent never opened its environment")

	woke, err := h.eng.RunnerConnected(ctx, lt.DefaultProject, "box3", "key1", []string{"gpu"})
	require.NoError(t, err)
	require.Zero(t, woke, "another gpu runner: the sub-agent's workspace is its root's, on box1")

	rb.refuseSubagents.Store(false)
	woke, err = h.eng.RunnerConnected(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"})
	require.NoError(t, err)
	require.Equal(t, 1, woke)
	h.waitStatus(s.ID, lt.SessionIdle)
	checkJournal(t, h.store, kid)
}

// TestRunnerFreedWakesAsManyAsItTakes: a runner with a freed slot wakes
// at most as many waiting sessions as it takes now, not every one that
// waits for it.
func TestRunnerFreedWakesAsManyAsItTakes(t *testing.T) {
	h, rb := newRunnerHarness(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		s := create(t, h, onGPU(spec(t, `[{"text":"done"}]`)), nil)
		h.waitStatus(s.ID, lt.SessionRequiresAction)
		ids = append(ids, s.ID)
	}
	rb.connected.Store(true)
	woke, err := h.eng.RunnerFreed(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"}, 0)
	require.NoError(t, err)
	require.Zero(t, woke, "no slot: no wake")
	woke, err = h.eng.RunnerFreed(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"}, 1)
	require.NoError(t, err)
	require.Equal(t, 1, woke)
	waiting := func() int {
		n := 0
		for _, id := range ids {
			if pending, _ := h.eng.ListActions(ctx, id, string(lt.ActionPending)); len(pending) > 0 {
				n++
			}
		}
		return n
	}
	require.Equal(t, 2, waiting(), "the others still wait for a slot")
	woke, err = h.eng.RunnerFreed(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"}, 5)
	require.NoError(t, err)
	require.Equal(t, 2, woke, "the others")
	for _, id := range ids {
		h.waitStatus(id, lt.SessionIdle)
	}
}

// TestEnvironmentConnectionRunnerFull: with every matching runner at its
// capacity the session waits, and its action says so (not that no runner
// is connected); a freed slot wakes it.
func TestEnvironmentConnectionRunnerFull(t *testing.T) {
	h, rb := newRunnerHarness(t)
	rb.connected.Store(true)
	rb.full.Store(true)
	ctx := context.Background()
	s := create(t, h, onGPU(spec(t, `[{"text":"done"}]`)), nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	a := pendingEnvAction(t, h, s.ID)
	require.Contains(t, a.Summary, "is at its capacity")
	require.Contains(t, a.Reason, "at their capacity")

	rb.full.Store(false)
	woke, err := h.eng.RunnerFreed(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"}, 1)
	require.NoError(t, err)
	require.Equal(t, 1, woke)
	h.waitStatus(s.ID, lt.SessionIdle)
}

// actionScans is the engine's store, counting the scans of the pending
// environment_connection actions.
type actionScans struct {
	store.Store
	n atomic.Int32
}

func (s *actionScans) ActionListAll(ctx context.Context, p *store.ActionListParams) ([]*store.DocRow, error) {
	if p != nil && p.Type == string(lt.ActionEnvironmentConnection) {
		s.n.Add(1)
	}
	return s.Store.ActionListAll(ctx, p)
}

// TestRunnerFreedReadsNothingWhenNothingWaits: a runner's environment
// closing with room left (RunnerFreed) reads no pending action while no
// session of the project waits for a runner, once a scan found none; a
// session that starts waiting (its action durable) is found by the next
// close, and after the trust period a close scans again (an action
// another node raised is found then).
func TestRunnerFreedReadsNothingWhenNothingWaits(t *testing.T) {
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	rb := &runnerBackend{}
	h.wrapEnvironments = func(b environment.Backend) environment.Backend {
		rb.Backend = b
		return rb
	}
	scans := &actionScans{}
	h.wrapStore = func(s store.Store) store.Store {
		scans.Store = s
		return scans
	}
	h.start("node-a")
	ctx := context.Background()
	freed := func() int {
		t.Helper()
		woke, err := h.eng.RunnerFreed(ctx, lt.DefaultProject, "box1", "key1", []string{"gpu"}, 1)
		require.NoError(t, err)
		return woke
	}

	require.Zero(t, freed())
	require.EqualValues(t, 1, scans.n.Load(), "the first close looks")
	for range 100 {
		require.Zero(t, freed())
	}
	require.EqualValues(t, 1, scans.n.Load(), "nothing waits: the closes after it read nothing")

	s := create(t, h, onGPU(spec(t, `[{"text":"done"}]`)), nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	pendingEnvAction(t, h, s.ID)
	rb.connected.Store(true)
	before := scans.n.Load()
	require.Equal(t, 1, freed(), "the session that waits is found")
	require.Greater(t, scans.n.Load(), before)
	h.waitStatus(s.ID, lt.SessionIdle)

	require.Zero(t, freed(), "found none now")
	settled := scans.n.Load()
	require.Zero(t, freed())
	require.Equal(t, settled, scans.n.Load())
	h.clock.Advance(31 * time.Second)
	require.Zero(t, freed())
	require.Equal(t, settled+1, scans.n.Load(), "a scan's verdict is trusted for a bounded time")
}

// nodeB is another node's engine on h's store and clock (not started: it
// claims nothing), the count of its scans for waiting sessions, and a
// close of one of runner box1's environments on it (RunnerFreed, one slot
// free), returning how many sessions it woke.
func nodeB(t *testing.T, h *harness) (*engine.Engine, *actionScans, func() int) {
	t.Helper()
	scans := &actionScans{Store: h.store}
	other, err := engine.New(scans, &engine.Config{
		WorkspaceRoot: filepath.Join(t.TempDir(), "workspaces"), NodeID: "node-b", Clock: h.clock,
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)},
	})
	require.NoError(t, err)
	return other, scans, func() int {
		t.Helper()
		woke, err := other.RunnerFreed(context.Background(), lt.DefaultProject, "box1", "key1", []string{"gpu"}, 1)
		require.NoError(t, err)
		return woke
	}
}

// TestRunnerFreedFindsAnotherNodesWaiter: the engine of a node that
// raised no environment_connection action itself (node-b, on the same
// store) trusts a scan that found none for a bounded time only: a session
// another node parked on a runner meanwhile is found by a close after it.
func TestRunnerFreedFindsAnotherNodesWaiter(t *testing.T) {
	h, rb := newRunnerHarness(t)
	_, scans, freed := nodeB(t, h)
	require.Zero(t, freed())
	require.EqualValues(t, 1, scans.n.Load())

	s := create(t, h, onGPU(spec(t, `[{"text":"done"}]`)), nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	pendingEnvAction(t, h, s.ID)
	rb.connected.Store(true)
	require.Zero(t, freed(), "node-b trusts its scan for a while")
	require.EqualValues(t, 1, scans.n.Load())
	h.clock.Advance(31 * time.Second)
	require.Equal(t, 1, freed(), "then it looks again, and finds the session")
	h.waitStatus(s.ID, lt.SessionIdle)
}

// TestRunnerFreedHearsAnotherNodesWaiterAtOnce: a node that trusts its
// scan of a project (no session waits for a runner) stops trusting it as
// soon as the store announces an action raised on another node, with no
// time passing on its clock: the slot freed next wakes that session.
func TestRunnerFreedHearsAnotherNodesWaiterAtOnce(t *testing.T) {
	h, rb := newRunnerHarness(t)
	other, scans, freed := nodeB(t, h)
	stop := other.ListenForTest(context.Background())
	defer stop()
	require.Zero(t, freed())
	require.Zero(t, freed(), "node-b trusts its scan")
	require.EqualValues(t, 1, scans.n.Load())

	s := create(t, h, onGPU(spec(t, `[{"text":"done"}]`)), nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	pendingEnvAction(t, h, s.ID)
	rb.connected.Store(true)
	woke := 0
	require.Eventually(t, func() bool {
		woke += freed()
		return woke == 1
	}, 10*time.Second, time.Millisecond, "node-b heard of the action: its next freed slot finds the session, its clock unmoved")
	h.waitStatus(s.ID, lt.SessionIdle)
}

// TestApprovalOfACommandOnARunnerSaysWhere: the consequence of a command
// that runs on a runner names that runner's machine and user, not the
// server: its plain sandbox confines nothing there.
func TestApprovalOfACommandOnARunnerSaysWhere(t *testing.T) {
	h, rb := newRunnerHarness(t)
	rb.connected.Store(true)
	sp := onGPU(spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo hi"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "shell"}))
	sp.Policies = []lt.Policy{{Name: "look-first", Tool: "shell", Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)
	a := pendingApproval(t, h, s.ID)
	require.True(t, strings.HasPrefix(a.Consequence, `Runs a command on the machine of runner "box1", with no sandbox: it can read and change whatever the runner's user can`), a.Consequence)
	require.NotContains(t, a.Consequence, "server")
}
