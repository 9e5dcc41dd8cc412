package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// countingStore records what a session's claim reads of its journal.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	reads []eventRead // while armed
	gets  int         // SessionGets while armed
	// ownGets counts the SessionGets of gets whose context carries
	// ownRead: a component's own, apart from what other parts of the
	// engine read meanwhile (the check of a stale copy after the
	// journal grew, say).
	ownGets int
	// lastSeqs counts SessionLastSeqs while armed: the tick's cheap read
	// of the controls, apart from the row reads (gets).
	lastSeqs int
	// afterAppend, if set, is called after each append that succeeded.
	afterAppend func([]store.Event)
	armed       bool
	// hideSnapshot: SessionGet returns the state without its context
	// snapshot.
	hideSnapshot bool
}

// ownRead marks the context of the reads a test counts as ownGets.
type ownRead struct{}

type eventRead struct {
	after int64
	rows  int
}

func (s *countingStore) EventList(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]store.Event, error) {
	evs, err := s.Store.EventList(ctx, sessionID, afterSeq, limit)
	s.mu.Lock()
	if s.armed {
		s.reads = append(s.reads, eventRead{after: afterSeq, rows: len(evs)})
	}
	s.mu.Unlock()
	return evs, err
}

// SessionGet hides the session's context snapshot while hideSnapshot is
// set: a claim then replays the whole journal, as before snapshots.
func (s *countingStore) SessionGet(ctx context.Context, id string) (*store.SessionRow, error) {
	row, err := s.Store.SessionGet(ctx, id)
	s.mu.Lock()
	hide := s.hideSnapshot
	if s.armed {
		s.gets++
		if ctx.Value(ownRead{}) != nil {
			s.ownGets++
		}
	}
	s.mu.Unlock()
	if err != nil || !hide {
		return row, err
	}
	var st journal.State
	if err := json.Unmarshal(row.State, &st); err != nil {
		return nil, err
	}
	st.ContextSnapshot = nil
	row.State, err = json.Marshal(&st)
	return row, err
}

func (s *countingStore) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	s.mu.Lock()
	if s.armed {
		s.lastSeqs++
	}
	s.mu.Unlock()
	return s.Store.SessionLastSeq(ctx, id)
}

// SessionCreate calls afterAppend, if set, with the events written: a
// session created here is written with its first append (createjoin.go).
func (s *countingStore) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	return s.appended(s.Store.SessionCreate(ctx, p))
}

// EventAppend calls afterAppend, if set, with the events appended.
func (s *countingStore) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	return s.appended(s.Store.EventAppend(ctx, p))
}

// appended calls afterAppend, if set, with the events a write that
// succeeded wrote, and passes the write's answer on.
func (s *countingStore) appended(evs []store.Event, err error) ([]store.Event, error) {
	s.mu.Lock()
	after := s.afterAppend
	s.mu.Unlock()
	if err == nil && after != nil {
		after(evs)
	}
	return evs, err
}

func (s *countingStore) arm(on bool) []eventRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = on
	out := s.reads
	s.reads, s.gets, s.lastSeqs = nil, 0, 0
	return out
}

// echoTool is a read-only tool whose output repeats its arguments, so that
// every item of the conversation differs.
type echoTool struct{}

func (echoTool) Name() string                { return "echo" }
func (echoTool) Description() string         { return "Repeats its arguments." }
func (echoTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (echoTool) Effect() lt.EffectClass      { return lt.EffectRead }
func (echoTool) Run(_ context.Context, c *tool.Call) (*tool.Result, error) {
	return &tool.Result{Output: "echo " + string(c.Arguments)}, nil
}

// stepsModel answers each step call with an echo call (or the one call
// makes of the call's number, when set), and every turn's perTurn-th call
// with a final answer; a call without tools (compaction) gets a numbered
// summary.
type stepsModel struct {
	mu        sync.Mutex
	perTurn   int
	call      func(made int) model.ToolCall
	made      int
	summaries int
}

func (m *stepsModel) Respond(_ context.Context, req *model.Request) (*model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	usage := lt.Usage{InputTokens: 100, OutputTokens: 10}
	if len(req.Tools) == 0 {
		m.summaries++
		return &model.Response{Text: fmt.Sprintf("Summary %d: the agent echoed numbered notes.", m.summaries), Usage: usage}, nil
	}
	m.made++
	if m.made%m.perTurn == 0 {
		return &model.Response{Text: fmt.Sprintf("parked after call %d", m.made), Usage: usage}, nil
	}
	c := model.ToolCall{Name: "echo"}
	if m.call != nil {
		c = m.call(m.made)
	} else {
		c.Arguments, _ = json.Marshal(map[string]any{"note": fmt.Sprintf("note number %d", m.made)})
	}
	return &model.Response{Text: fmt.Sprintf("thinking %d", m.made), ToolCalls: []model.ToolCall{c}, Usage: usage}, nil
}

// startResumeEngine starts an engine on a counting SQLite store with the
// steps model; each of with may change its configuration.
func startResumeEngine(tb testing.TB, perTurn int, with ...func(*Config)) (*Engine, *countingStore) {
	tb.Helper()
	var cs *countingStore
	e := startStepsEngine(tb, perTurn, func(st store.Store) store.Store {
		cs = &countingStore{Store: st}
		return cs
	}, with...)
	return e, cs
}

// startStepsEngine starts an engine with the steps model on a SQLite store
// wrapped by wrap.
func startStepsEngine(tb testing.TB, perTurn int, wrap func(store.Store) store.Store, with ...func(*Config)) *Engine {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { st.Close() })
	require.NoError(tb, st.Migrate(ctx))
	cs := wrap(st)
	cfg := &Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"), NodeID: "node-a",
		Tools:        append(tool.Builtins(), echoTool{}),
		Providers:    map[string]model.Provider{"steps": &stepsModel{perTurn: perTurn}},
		PollInterval: 10 * time.Millisecond,
	}
	for _, f := range with {
		f(cfg)
	}
	e, err := New(cs, cfg)
	require.NoError(tb, err)
	require.NoError(tb, e.Start(ctx))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})
	return e
}

// resumeSpec compacts every few dozen steps (a small window).
func resumeSpec(perTurn int) *lt.AgentSpec {
	return &lt.AgentSpec{
		Model:        lt.ModelSpec{Provider: "steps", Name: "steps", ContextWindow: 2500},
		Instructions: "Echo numbered notes.",
		Tools:        []lt.ToolSpec{{Name: "echo"}},
		MaxSteps:     perTurn + 1,
	}
}

func waitIdle(tb testing.TB, e *Engine, id string) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		s, err := e.GetSession(context.Background(), id)
		require.NoError(tb, err)
		require.False(tb, s.Status.Terminal() && s.Status != lt.SessionIdle, "session %s: %s (%s)", id, s.Status, s.StopReason)
		return s.Status == lt.SessionIdle
	}, time.Minute, 2*time.Millisecond)
}

// parkedSession creates a session of the resume spec and runs it for turns
// turns, each ending parked (idle).
func parkedSession(tb testing.TB, e *Engine, perTurn, turns int) string {
	tb.Helper()
	ctx := context.Background()
	s, err := e.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: resumeSpec(perTurn), Input: "echo", Goal: "every note echoed", Constraints: []string{"Keep notes short."}})
	require.NoError(tb, err)
	waitIdle(tb, e, s.ID)
	for range turns - 1 {
		continueTurn(tb, e, s.ID)
	}
	return s.ID
}

// continueTurn resumes a parked session with a new turn and waits until it
// is parked again.
func continueTurn(tb testing.TB, e *Engine, id string) {
	tb.Helper()
	_, err := e.CreateTurn(context.Background(), id, &lt.CreateTurnRequest{Input: "continue"})
	require.NoError(tb, err)
	waitIdle(tb, e, id)
}

// TestResumeReadsOnlyAfterTheLastCompaction: a parked session that was
// compacted many times is resumed by a new turn; the claim reads none of
// the journal before the latest compaction's snapshot, and what it reads
// is far less than the journal.
func TestResumeReadsOnlyAfterTheLastCompaction(t *testing.T) {
	const perTurn = 40
	e, cs := startResumeEngine(t, perTurn)
	ctx := context.Background()
	id := parkedSession(t, e, perTurn, 4)
	_, st, err := e.loadState(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, st.ContextSnapshot, "the session compacted")
	from, journal := st.ContextSnapshot.Seq, st.Session.LastEventSeq
	require.Greater(t, from, journal/2, "compacted late in the session")

	cs.arm(true)
	continueTurn(t, e, id)
	reads := cs.arm(false)
	require.NotEmpty(t, reads, "the claim read the journal after the snapshot")
	rows := 0
	for _, r := range reads {
		require.GreaterOrEqual(t, r.after, from, "a read before the latest compaction (seq %d)", from)
		rows += r.rows
	}
	require.Less(t, int64(rows), journal/2, "rows read on claim")

	// The resumed context is the one the whole journal gives.
	checkResumedContext(t, e, id)
}

// checkResumedContext builds a runner of the session from its latest
// snapshot and another from the whole journal: they derive the same.
func checkResumedContext(t *testing.T, e *Engine, id string) {
	t.Helper()
	ctx := context.Background()
	r, err := e.newRunner(ctx, store.Lease{SessionID: id})
	require.NoError(t, err)
	defer r.env.close()
	require.NotNil(t, r.st.ContextSnapshot)
	require.Positive(t, r.tx.base, "resumed from a snapshot")

	full, err := e.newRunner(ctx, store.Lease{SessionID: id})
	require.NoError(t, err)
	defer full.env.close()
	full.tx, full.mcp, full.wsWriter = newTranscript(&full.spec), newMCPTools(), ""
	full.tools = newToolCatalog(e.tools, &full.spec)
	full.st.ContextSnapshot = nil
	require.NoError(t, full.rebuild(ctx, full.durableSeq))

	require.Equal(t, full.tx.messages(), r.tx.messages())
	require.Equal(t, full.tx.steerCount(), r.tx.steerCount())
	require.Equal(t, full.tx.cut, r.tx.cut)
	require.Equal(t, full.tx.end(), r.tx.end())
	require.Equal(t, full.tx.inputs, r.tx.inputs)
	require.Equal(t, full.mcp.listed, r.mcp.listed)
	require.Equal(t, full.wsWriter, r.wsWriter)
	require.Equal(t, full.tools.definitions(), r.tools.definitions())
}

// TestResumedContextKeepsPinnedAndSteers: a person's constraint and
// messages to queued turns, given across compactions, are in the context
// a resumed worker builds exactly as a replay of the whole journal puts
// them.
func TestResumedContextKeepsPinnedAndSteers(t *testing.T) {
	const perTurn = 30
	e, _ := startResumeEngine(t, perTurn)
	ctx := context.Background()
	id := parkedSession(t, e, perTurn, 1)
	for i := range 4 {
		_, err := e.AddConstraint(ctx, id, &lt.AddConstraintRequest{Constraint: fmt.Sprintf("Rule %d.", i)})
		require.NoError(t, err)
		// The worker may claim the turn before or after the message: either
		// order is journaled, and both rebuild alike.
		_, err = e.CreateTurn(ctx, id, &lt.CreateTurnRequest{Input: fmt.Sprintf("continue %d", i)})
		require.NoError(t, err)
		_, _ = e.SteerSession(ctx, id, &lt.SteerRequest{Input: fmt.Sprintf("hurry %d", i)})
		waitIdle(t, e, id)
		if i > 0 {
			checkResumedContext(t, e, id)
		}
	}
	r, err := e.newRunner(ctx, store.Lease{SessionID: id})
	require.NoError(t, err)
	defer r.env.close()
	sys := r.tx.messages()[0].Text
	for i := range 4 {
		require.Contains(t, sys, fmt.Sprintf("Constraint: Rule %d.", i))
	}
	require.Contains(t, sys, "Constraint: Keep notes short.")
}

// TestForkDoesNotResumeFromItsParentsSnapshot: a fork copies its parent's
// journal, compactions and their snapshot references included, with ids
// renamed; the parent's snapshot holds the parent's ids, so the fork's
// claims replay its journal until it compacts itself, and build the context
// that replay gives.
func TestForkDoesNotResumeFromItsParentsSnapshot(t *testing.T) {
	const perTurn = 40
	e, _ := startResumeEngine(t, perTurn)
	ctx := context.Background()
	id := parkedSession(t, e, perTurn, 2)
	cps, err := e.ListCheckpoints(ctx, id)
	require.NoError(t, err)
	fork, err := e.ForkSession(ctx, id, &lt.ForkRequest{CheckpointID: cps[len(cps)-1].ID}, "")
	require.NoError(t, err)

	row, st, err := e.loadState(ctx, fork.ID)
	require.NoError(t, err)
	require.NotNil(t, st.ContextSnapshot, "the fork's journal names its parent's snapshot")
	snap, err := e.readContextSnapshot(ctx, fork.ID, row.LastSeq, st.ContextSnapshot)
	require.NoError(t, err)
	require.Nil(t, snap, "the parent's snapshot is not the fork's")
	checkResumedContext(t, e, fork.ID)

	continueTurn(t, e, fork.ID)
	row, st, err = e.loadState(ctx, fork.ID)
	require.NoError(t, err)
	snap, err = e.readContextSnapshot(ctx, fork.ID, row.LastSeq, st.ContextSnapshot)
	require.NoError(t, err)
	require.NotNil(t, snap, "the fork compacted: its own snapshot")
	checkResumedContext(t, e, fork.ID)
}

// BenchmarkResume is a claim of a parked session (newRunner: its state,
// its spec and the model context rebuilt) after N steps with compaction
// on: from its latest context snapshot, and from its first event as before
// snapshots. It reports events-read: the journal rows the claim read.
func BenchmarkResume(b *testing.B) {
	for _, steps := range []int{200, 2000} {
		const perTurn = 100
		e, cs := startResumeEngine(b, perTurn)
		ctx := context.Background()
		id := parkedSession(b, e, perTurn, steps/perTurn)
		for _, from := range []string{"snapshot", "first-event"} {
			b.Run(fmt.Sprintf("steps=%d/from=%s", steps, from), func(b *testing.B) {
				cs.mu.Lock()
				cs.hideSnapshot = from == "first-event"
				cs.mu.Unlock()
				cs.arm(true)
				b.ResetTimer()
				for range b.N {
					r, err := e.newRunner(ctx, store.Lease{SessionID: id})
					if err != nil {
						b.Fatal(err)
					}
					r.env.close()
				}
				b.StopTimer()
				rows := 0
				for _, r := range cs.arm(false) {
					rows += r.rows
				}
				b.ReportMetric(float64(rows)/float64(b.N), "events-read")
			})
		}
	}
}
