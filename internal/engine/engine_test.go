package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fakeClock is a settable clock; After uses real timers so the scheduler's
// short poll keeps working, while Now (leases, budgets) moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
	// holdHours makes After of an hour or more never fire, as it would not
	// within a test in real time: a test of what ends a long wait early
	// sets it.
	holdHours bool
	// afters are the waits asked of After, in order.
	afters []time.Duration
}

// waits returns the waits asked of After so far.
func (c *fakeClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.afters...)
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.afters = append(c.afters, d)
	hold := c.holdHours && d >= time.Hour
	c.mu.Unlock()
	if hold {
		return make(chan time.Time)
	}
	return time.After(min(d, 20*time.Millisecond))
}
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type harness struct {
	t     *testing.T
	dir   string
	store *sqlite.Store
	eng   *engine.Engine
	clock *fakeClock
	tools []tool.Tool // built-ins to run with (nil: the defaults)
	// providers are added to the scripted one; env is the server's
	// environment as LookupEnv sees it.
	providers map[string]model.Provider
	env       map[string]string
	vault     engine.Vault
	// modelKeyEnv is the operator's allowlist of api_key_env variables
	// (nil: the engine's default); controlPlane the server's own
	// addresses (nil: none).
	modelKeyEnv  map[string][]string
	controlPlane *egress.ControlPlane
	// pollInterval is the scheduler's (0: 10 ms).
	pollInterval time.Duration
	// sandbox runs the tools' programs (nil: plain subprocesses).
	sandbox sandbox.Backend
	// wrapEnvironments, when set, wraps the local environment backend
	// (over sandbox, or the local one) the engine opens environments with.
	wrapEnvironments func(environment.Backend) environment.Backend
	// wrapStore, when set, wraps the store the engine uses (to count
	// its reads).
	wrapStore func(store.Store) store.Store
	// keepOwners: the environments record which project owns the
	// snapshots they take, as the node's own do (snapshot.Owners).
	keepOwners bool
}

func openStore(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(context.Background()))
	return st
}

// newHarnessWith starts an engine that also has the given providers and
// environment.
func newHarnessWith(t *testing.T, providers map[string]model.Provider, env map[string]string) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}, providers: providers, env: env}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	h.start("node-a")
	return h
}

func newHarness(t *testing.T, extraTools ...tool.Tool) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, clock: &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}}
	if len(extraTools) > 0 {
		h.tools = append(tool.Builtins(), extraTools...)
	}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	h.start("node-a")
	return h
}

// environments gives cfg a local environment backend of its own, over
// the engine's workspaces and snapshot cache, wrapped by
// h.wrapEnvironments.
func (h *harness) environments(cfg *engine.Config) {
	h.t.Helper()
	spaces, err := workspace.New(cfg.WorkspaceRoot)
	require.NoError(h.t, err)
	cache, err := snapshot.NewCache(h.store, nil)
	require.NoError(h.t, err)
	sb := h.sandbox
	if sb == nil {
		sb = sandbox.NewLocal()
	}
	lc := &environment.LocalConfig{Sandbox: sb, Workspaces: spaces, Blobs: h.store, Cache: cache}
	if h.keepOwners {
		lc.Owners = h.store
	}
	local, err := environment.NewLocal(lc)
	require.NoError(h.t, err)
	cfg.Workspaces, cfg.SnapshotCache, cfg.Environments = spaces, cache, h.wrapEnvironments(local)
}

func (h *harness) start(node string) {
	h.t.Helper()
	providers := map[string]model.Provider{"scripted": scripted.New(nil)}
	for name, p := range h.providers {
		providers[name] = p
	}
	// No fake clock (a test in a synctest bubble): the engine's real clock,
	// which the bubble's virtual time drives.
	var clock engine.Clock
	if h.clock != nil {
		clock = h.clock
	}
	poll := 10 * time.Millisecond
	if h.pollInterval > 0 {
		poll = h.pollInterval
	}
	cfg := &engine.Config{
		WorkspaceRoot: filepath.Join(h.dir, "workspaces"), NodeID: node, Clock: clock,
		Providers:    providers,
		PollInterval: poll, Tools: h.tools,
		LookupEnv: func(name string) (string, bool) {
			v, ok := h.env[name]
			return v, ok
		},
		Vault: h.vault, ModelKeyEnv: h.modelKeyEnv, ControlPlane: h.controlPlane, Sandbox: h.sandbox,
	}
	if h.wrapEnvironments != nil {
		h.environments(cfg)
	}
	var st store.Store = h.store
	if h.wrapStore != nil {
		st = h.wrapStore(st)
	}
	eng, err := engine.New(st, cfg)
	require.NoError(h.t, err)
	require.NoError(h.t, eng.Start(context.Background()))
	h.eng = eng
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Stop(ctx)
	})
}

// restart replaces the running engine with a new one (after a change of
// the harness's configuration).
func (h *harness) restart(node string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(h.t, h.eng.Stop(ctx))
	h.start(node)
}

func (h *harness) waitStatus(id string, want ...lt.SessionStatus) *lt.Session {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := h.eng.GetSession(context.Background(), id)
		require.NoError(h.t, err)
		for _, w := range want {
			if s.Status == w {
				return s
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("session %s: status %s, want %v", id, s.Status, want)
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

func spec(t *testing.T, script string, tools ...lt.ToolSpec) *lt.AgentSpec {
	t.Helper()
	return &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(script)}, Instructions: "Be useful.", Tools: tools}
}

func TestSessionRunsToCompletion(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[
		 {"tool_calls":[{"name":"write_file","arguments":{"path":"notes.md","content":"hello world"}}]},
		 {"tool_calls":[{"name":"shell","arguments":{"command":"wc -w < notes.md"}}]},
		 {"tool_calls":[{"name":"lookup","arguments":{"id":"c-1"}}]},
		 {"tool_calls":[{"name":"finish","arguments":{"summary":"done","artifacts":["notes.md"]}}]}]`,
			lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "finish"},
			lt.ToolSpec{Name: "lookup", Type: "function", Effect: lt.EffectRead,
				Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}),
		Input: "write notes", Goal: "notes exist",
	})
	require.NoError(t, err)
	require.Equal(t, lt.SessionQueued, s.Status)

	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionFunctionCall, act.Type)
	require.Equal(t, "lookup", act.Tool)
	require.JSONEq(t, `{"id":"c-1"}`, string(act.Arguments))

	// The running turn's figures are read live from the session's state:
	// its row was written when it started, and not at each step since.
	row, err := h.store.TurnGet(ctx, s.ID, act.TurnID)
	require.NoError(t, err)
	var stored lt.Turn
	require.NoError(t, json.Unmarshal(row.Doc, &stored))
	require.Equal(t, lt.TurnRunning, stored.Status)
	require.Less(t, stored.Steps, 3, "the row was written at a step")
	running, err := h.eng.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, running, 1)
	require.Equal(t, lt.TurnRunning, running[0].Status)
	require.Equal(t, 3, running[0].Steps)
	require.Equal(t, s.Usage, running[0].Usage)
	one, err := h.eng.GetTurn(ctx, s.ID, act.TurnID)
	require.NoError(t, err)
	require.Equal(t, running[0], *one)

	// A decision of another shape is refused; the right one resolves; a
	// repeat returns the first result; a different one conflicts.
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: "approve"})
	require.Error(t, err)
	dec := &lt.Decision{Output: json.RawMessage(`{"name":"ACME"}`)}
	got, err := h.eng.DecideAction(ctx, s.ID, act.ID, dec)
	require.NoError(t, err)
	require.Equal(t, lt.ActionResolved, got.Status)
	again, err := h.eng.DecideAction(ctx, s.ID, act.ID, dec)
	require.NoError(t, err)
	require.Equal(t, got.ResolvedAt, again.ResolvedAt)
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Error: "nope"})
	require.ErrorContains(t, err, "conflict")

	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, int64(4), s.Usage.ModelCalls)
	require.Equal(t, int64(3), s.Usage.ToolCalls)

	turns, err := h.eng.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, turns, 1)
	require.Equal(t, lt.TurnCompleted, turns[0].Status)
	require.Equal(t, "done", turns[0].Output)

	arts, err := h.eng.ListArtifacts(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, arts, 1)
	_, data, err := h.eng.ArtifactContent(ctx, arts[0].ID)
	require.NoError(t, err)
	require.Equal(t, "hello world", string(data))

	effects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 3)
	for _, e := range effects {
		require.Equal(t, lt.EffectSucceeded, e.Status, e.Tool)
		require.NotEmpty(t, e.IdempotencyKey)
	}

	// The shell saw the file the write produced.
	evs, err := h.eng.ListEvents(ctx, s.ID, 0, 1000)
	require.NoError(t, err)
	var shellOut string
	for _, ev := range evs {
		if ev.Type == lt.EventToolCompleted {
			var d lt.ToolCompletedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			if d.Tool == "shell" {
				shellOut = string(d.Output)
			}
		}
	}
	require.Contains(t, shellOut, `"stdout":"2\n"`)
	checkJournal(t, h.store, s.ID)
}

// checkJournal asserts that seqs are gap-free from 1 and that replaying the
// whole journal gives exactly the stored projection.
func checkJournal(t *testing.T, st store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	evs, err := st.EventList(ctx, id, 0, 10000)
	require.NoError(t, err)
	var replay journal.State
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Seq)
		w := lt.Event{Seq: ev.Seq, Type: ev.Type, Time: ev.Time, SessionID: ev.SessionID, TurnID: ev.TurnID, Step: ev.Step, WorkerID: ev.WorkerID, Data: ev.Data}
		require.NoError(t, journal.Apply(&replay, w, nil))
	}
	row, err := st.SessionGet(ctx, id)
	require.NoError(t, err)
	var stored journal.State
	require.NoError(t, json.Unmarshal(row.State, &stored))
	want, _ := json.Marshal(stored)
	got, _ := json.Marshal(replay)
	require.JSONEq(t, string(want), string(got))
}

func TestIrreversibleEffectInDoubtAfterCrash(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "ran")
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"echo x >> `+marker+`; touch `+marker+`.done; sleep 30"}}]},{"text":"ok"}]`,
			lt.ToolSpec{Name: "shell"}),
		Input: "go",
	})
	require.NoError(t, err)
	// Wait until the command ran, then kill the engine hard (its runner is
	// cancelled mid-call, like a SIGKILL leaves it).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(marker + ".done"); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "command never ran")
		time.Sleep(2 * time.Millisecond)
	}
	hard, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, h.eng.Stop(hard))

	h.start("node-a") // the same node restarts: its old leases expire at once
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Equal(t, "shell", act.Tool)

	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionHappened, Output: json.RawMessage(`{"exit_code":0}`)})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	data, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "x\n", string(data), "the irreversible command must run exactly once")
	effects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, lt.EffectResolved, effects[0].Status)
	require.Equal(t, lt.DecisionHappened, effects[0].Resolution)
	checkJournal(t, h.store, s.ID)
}

// TestLargePayloadsBecomeBlobs checks that an event payload over 64 KiB is
// stored as a content-addressed blob that the event references, and that the
// session still runs on the full payload.
func TestLargePayloadsBecomeBlobs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	big := strings.Repeat("x", 100<<10)
	input := "write a big file: " + strings.Repeat("i", 80<<10)
	args, err := json.Marshal(map[string]string{"path": "big.txt", "content": big})
	require.NoError(t, err)
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"tool_calls":[{"name":"write_file","arguments":`+string(args)+`}]},
		 {"tool_calls":[{"name":"read_file","arguments":{"path":"big.txt"}}]},{"text":"ok"}]`,
			lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "read_file"}),
		Input: input,
	})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	evs, err := h.eng.ListEvents(ctx, s.ID, 0, 1000)
	require.NoError(t, err)
	var blobs int
	for _, ev := range evs {
		require.Less(t, len(ev.Data), 8<<10, "event %d (%s) is stored small", ev.Seq, ev.Type)
		var stub lt.BlobData
		if json.Unmarshal(ev.Data, &stub) == nil && stub.Blob.SHA256 != "" {
			blobs++
			full, err := h.eng.GetBlob(ctx, stub.Blob.SHA256)
			require.NoError(t, err)
			require.Equal(t, stub.Blob.Size, int64(len(full)))
			require.True(t, strings.Contains(string(full), big[:1000]) || strings.Contains(string(full), input[:1000]),
				"blob of event %d (%s) holds the large payload", ev.Seq, ev.Type)
		}
	}
	require.GreaterOrEqual(t, blobs, 5, "the input (session.created, turn.created), model.responded, tool.requested and the read's tool.completed carry large payloads")
	var created lt.BlobData
	require.NoError(t, json.Unmarshal(evs[0].Data, &created))
	require.NotEmpty(t, created.Blob.SHA256, "session.created with a large input is stored as a blob")
	data, err := os.ReadFile(filepath.Join(h.dir, "workspaces", s.ID, "big.txt"))
	require.NoError(t, err)
	require.Equal(t, big, string(data))
}

// TestLeaseTakeoverAfterExpiry: a node that stops renewing (it died, or is
// paused) keeps its sessions only until its lease expires; then another node
// claims them, with a higher epoch, and finishes them. Time is the injected
// clock: nothing is claimed before it passes the TTL.
func TestLeaseTakeoverAfterExpiry(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "started")
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"touch `+marker+`; sleep 30"}}]},{"text":"ok"}]`,
			lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}),
		Input: "go",
	})
	require.NoError(t, err)
	waitFile(t, marker)
	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "node-a", row.Lease.Owner)
	epoch := row.Lease.Epoch
	hard, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, h.eng.Stop(hard)) // node A dies holding the lease

	h.start("node-b")
	// Before the TTL passes, node B must leave the session alone.
	for i := 0; i < 20; i++ {
		row, err := h.store.SessionGet(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, "node-a", row.Lease.Owner, "claimed before the lease expired")
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, os.Remove(marker))
	h.clock.Advance(31 * time.Second) // past the 30 s default TTL
	waitFile(t, marker)               // node B re-ran the idempotent call
	row, err = h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "node-b", row.Lease.Owner)
	require.Greater(t, row.Lease.Epoch, epoch)

	effects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, 2, effects[0].Attempts, "the call ran again, as the same effect")
}

// TestStopDrainsRunningStep: a graceful stop lets the running step finish
// and gives the lease back, so the next start resumes at once and nothing
// runs twice.
func TestStopDrainsRunningStep(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	dir := t.TempDir()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"touch `+dir+`/started; sleep 0.3; echo x >> `+dir+`/ran"}}]},{"text":"ok"}]`,
			lt.ToolSpec{Name: "shell"}),
		Input: "go",
	})
	require.NoError(t, err)
	waitFile(t, filepath.Join(dir, "started"))
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, h.eng.Stop(stopCtx))

	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Empty(t, row.Lease.Owner, "a drained node gives its leases back")
	effects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, lt.EffectSucceeded, effects[0].Status, "the running step finished before the stop")

	h.start("node-a")
	h.waitStatus(s.ID, lt.SessionIdle)
	data, err := os.ReadFile(filepath.Join(dir, "ran"))
	require.NoError(t, err)
	require.Equal(t, "x\n", string(data), "the irreversible command ran exactly once")
	checkJournal(t, h.store, s.ID)
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s never appeared", path)
		time.Sleep(2 * time.Millisecond)
	}
}

func TestModelErrorsAndRetries(t *testing.T) {
	for name, tc := range map[string]struct {
		script     string
		status     lt.SessionStatus
		stopReason string
		modelCalls int64
	}{
		"a server error is retried and the retry plays the next step": {
			`[{"error":{"status":500}},{"error":{"status":429,"retry_after_seconds":1}},{"text":"ok"}]`, lt.SessionIdle, "", 3},
		"a bad request is not retried": {
			`[{"error":{"status":400}},{"text":"never"}]`, lt.SessionFailed, lt.StopProviderError, 1},
		"retries run out": {
			`[{"error":{"status":503}},{"error":{"status":503}},{"error":{"status":503}},{"error":{"status":503}},{"error":{"status":503}},{"text":"late"}]`,
			lt.SessionFailed, lt.StopRetriesExhausted, 5},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			s, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{AgentSpec: spec(t, tc.script), Input: "go"})
			require.NoError(t, err)
			s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
			require.Equal(t, tc.status, s.Status)
			if tc.stopReason != "" {
				require.NotNil(t, s.StopReason)
				require.Equal(t, tc.stopReason, *s.StopReason)
			}
			require.Equal(t, tc.modelCalls, s.Usage.ModelCalls)
			checkJournal(t, h.store, s.ID)
		})
	}
}

// TestFollowUpTurnQueuedDuringLastStep: a turn posted while the running
// turn's last model call is in flight is not lost: the worker merges it and
// runs it after the first, and the session only goes idle after both.
func TestFollowUpTurnQueuedDuringLastStep(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"text":"first","delay_ms":300},{"text":"second"}]`), Input: "one",
	})
	require.NoError(t, err)
	// Wait until the first model call is in flight.
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := h.eng.ListEvents(ctx, s.ID, 0, 100)
		require.NoError(t, err)
		if evs[len(evs)-1].Type == lt.EventModelRequested {
			break
		}
		require.True(t, time.Now().Before(deadline))
		time.Sleep(2 * time.Millisecond)
	}
	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "two"})
	require.NoError(t, err)
	deadline = time.Now().Add(10 * time.Second)
	for {
		sess, err := h.eng.GetSession(ctx, s.ID)
		require.NoError(t, err)
		turns, err := h.eng.ListTurns(ctx, s.ID) // read after the session: idle must imply all done
		require.NoError(t, err)
		if sess.Status == lt.SessionIdle {
			require.Len(t, turns, 2)
			for _, tr := range turns {
				require.Equal(t, lt.TurnCompleted, tr.Status, "idle only once every turn is done")
			}
			require.Equal(t, "first", turns[0].Output)
			require.Equal(t, "second", turns[1].Output)
			break
		}
		require.True(t, time.Now().Before(deadline), "status %s", sess.Status)
		time.Sleep(2 * time.Millisecond)
	}
	checkJournal(t, h.store, s.ID)
}

// TestCancelWhileWaitingForAction: cancelling a session parked on a
// function call voids the action and ends the turn as cancelled.
func TestCancelWhileWaitingForAction(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: spec(t, `[{"tool_calls":[{"name":"lookup","arguments":{}}]},{"text":"never"}]`, lt.ToolSpec{Name: "lookup", Type: "function"}),
		Input:     "go",
	})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	_, err = h.eng.CancelSession(ctx, s.ID, &lt.CancelRequest{Reason: "changed my mind"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionCancelled)
	require.Empty(t, s.RequiredActions)
	require.Equal(t, lt.StopCancelled, *s.StopReason)
	acts, err := h.eng.ListActions(ctx, s.ID, "")
	require.NoError(t, err)
	require.Len(t, acts, 1)
	require.Equal(t, lt.ActionCancelled, acts[0].Status)
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.ErrorContains(t, err, "conflict", "a cancelled action cannot be decided")
	// A follow-up turn runs again on the cancelled session. The journal is
	// compared with the stored state once the turn is over: read while a
	// worker appends, the two reads would see different moments.
	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	checkJournal(t, h.store, s.ID)
}

// TestReplayWithNanosecondClock: a clock that reads nanoseconds (as the
// real one does) must not make the stored state differ from a replay of the
// journal, whose times the store keeps to the microsecond.
func TestReplayWithNanosecondClock(t *testing.T) {
	h := newHarness(t)
	h.clock.Advance(123456789 * time.Nanosecond)
	s := create(t, h, spec(t, `[{"text":"done"}]`), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, 123456000, s.UpdatedAt.Nanosecond(), "the session's time is the journal's")
	checkJournal(t, h.store, s.ID)
}
