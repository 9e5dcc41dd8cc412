package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// treeSpend is what a tree's sessions spent, summed from their own
// journals: every model call answered (its usage and cost) or failed, and
// every tool call started.
type treeSpend struct {
	CostUSD    float64
	Tokens     int64
	ModelCalls int64
	ToolCalls  int64
}

// addCall counts one model call with what it cost and used.
func (s *treeSpend) addCall(costUSD float64, u lt.Usage) {
	s.CostUSD += costUSD
	s.Tokens += u.InputTokens + u.OutputTokens
	s.ModelCalls++
}

// spendOfTree waits until every session of the tree rooted at rootID has
// stopped, then sums their journals (a verification call answers in
// acceptance.verified). It returns the sessions too.
func spendOfTree(t *testing.T, st store.Store, eng *engine.Engine, rootID string) (treeSpend, []*lt.Session) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	var all []*lt.Session
	for {
		all = all[:0]
		settled := true
		queue := []string{rootID}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			s, err := eng.GetSession(ctx, id)
			require.NoError(t, err)
			all = append(all, s)
			switch s.Status {
			case lt.SessionIdle, lt.SessionFailed, lt.SessionCancelled:
			default:
				settled = false
			}
			kids, err := eng.ListSessions(ctx, lt.ListSessionsParams{ParentID: id, Limit: 100})
			require.NoError(t, err)
			for _, k := range kids.Data {
				queue = append(queue, k.ID)
			}
		}
		if settled {
			// A stopped session holds no lease, so every reservation ended;
			// and a session no worker holds writes nothing more, so its
			// journal can be compared with its stored state.
			for _, s := range all {
				row, err := st.SessionGet(ctx, s.ID)
				require.NoError(t, err)
				if row.Lease.Owner != "" {
					settled = false
					break
				}
			}
			if settled {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tree of %s did not stop", rootID)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	var sum treeSpend
	for _, s := range all {
		evs, err := st.EventList(ctx, s.ID, 0, 10000)
		require.NoError(t, err)
		for _, ev := range evs {
			switch ev.Type {
			case lt.EventModelResponded:
				var d lt.ModelRespondedData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				sum.addCall(d.CostUSD, d.Usage)
			case lt.EventAcceptanceVerified:
				var d lt.AcceptanceVerifiedData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				sum.addCall(d.CostUSD, d.Usage)
			case lt.EventModelFailed:
				// A call abandoned in flight (a cancel, a deadline) is
				// counted for what it was sent, as the session's usage is.
				var d lt.ModelFailedData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				var u lt.Usage
				if d.Usage != nil {
					u = *d.Usage
				}
				sum.addCall(u.CostUSD, u)
			case lt.EventToolStarted:
				sum.ToolCalls++
			}
		}
	}
	return sum, all
}

// requireLedgerMatches checks that the tree's ledger spent exactly what the
// journals say.
func requireLedgerMatches(t *testing.T, st store.Store, rootID string, sum treeSpend) {
	t.Helper()
	l, err := st.TreeBudgetGet(context.Background(), rootID)
	require.NoError(t, err)
	require.InDelta(t, sum.CostUSD, l.Spent.CostUSD, 1e-9)
	require.Equal(t, sum.Tokens, l.Spent.Tokens)
	require.Equal(t, sum.ModelCalls, l.Spent.ModelCalls)
	require.Equal(t, sum.ToolCalls, l.Spent.ToolCalls)
	require.Zero(t, l.Reserved, "no reservation outlives its session's lease")
}

// treeRoot is a root that spawns n children at once, waits for them and
// answers; its own steps cost a cent and ten tokens.
func treeRoot(t *testing.T, n int, child map[string]any) *lt.AgentSpec {
	t.Helper()
	var spawns []any
	for range n {
		spawns = append(spawns, toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "do your part"}))
	}
	own := map[string]any{"input_tokens": 10, "output_tokens": 0}
	return spec(t, script(t,
		map[string]any{"tool_calls": spawns, "cost_usd": 0.01, "usage": own},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}, "cost_usd": 0.01, "usage": own},
		map[string]any{"text": "all parts done", "cost_usd": 0.01, "usage": own},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "read_file"})
}

// childStep is one step of a child: a tool call (reading a file that is
// not there, so the model goes on), or the final answer.
func childStep(cost float64, tokens int64, tool bool) map[string]any {
	st := map[string]any{"cost_usd": cost, "usage": map[string]any{"input_tokens": tokens * 3 / 4, "output_tokens": tokens / 4}, "delay_ms": 40}
	if tool {
		st["tool_calls"] = []any{toolCall("read_file", map[string]any{"path": "missing.txt"})}
	} else {
		st["text"] = "my part is done"
	}
	return st
}

// requireTreeExceeded checks that a session of the tree was stopped by the
// tree's ledger, and says so in its journal.
func requireTreeExceeded(t *testing.T, h *harness, all []*lt.Session, rootID, limit string) {
	t.Helper()
	for _, s := range all {
		for _, ev := range events(t, h, s.ID, lt.EventBudgetExceeded) {
			d := data[lt.BudgetExceededData](t, ev)
			if d.Tree == rootID && d.Limit == limit {
				require.Equal(t, lt.SessionFailed, s.Status)
				require.Equal(t, lt.StopBudgetExceeded, *s.StopReason)
				return
			}
		}
	}
	t.Fatalf("no session of the tree was stopped by the tree's %s limit", limit)
}

// TestTreeBudgetParallelChildrenCost reproduces issue 14's finding: a root
// with one dollar spawns six children at once whose steps cost 0.3 each.
// Each child's share is 1/7 of what is left, so each checks and goes; the
// tree spent 1.82. With the tree's ledger it spends at most the limit plus
// one step.
func TestTreeBudgetParallelChildrenCost(t *testing.T) {
	h, p := newSteerHarness(t)
	child := childSpec(script(t, childStep(0.3, 100, true), childStep(0.3, 100, false)), "read_file")
	s := create(t, h, treeRoot(t, 6, child), &lt.Budget{MaxCostUSD: 1})
	// The gated provider holds every child's call (childStep's delay_ms)
	// until all six children exist, so that they run at once, as in the
	// finding. With a real delay, a child answered while the root was
	// still spawning on a loaded machine: its report made the root refuse
	// the next spawn, and the root's own check stopped the tree before
	// any call met the ledger's refusal this test is about.
	require.Eventually(t, func() bool { return len(children(t, h, s.ID)) == 6 }, testTimeout, pollEvery, "the root spawned six children")
	p.open()
	sum, all := spendOfTree(t, h.store, h.eng, s.ID)
	require.Len(t, all, 7, "the root and its six children")
	require.LessOrEqual(t, sum.CostUSD, 1.0+0.3+1e-9, "the tree spent at most its root's limit plus one step")
	require.Greater(t, sum.CostUSD, 0.6, "the tree did work until its budget ran out")
	requireLedgerMatches(t, h.store, s.ID, sum)
	requireTreeExceeded(t, h, all, s.ID, "cost_usd")

	root, err := h.eng.GetSession(context.Background(), s.ID)
	require.NoError(t, err)
	require.LessOrEqual(t, root.Usage.CostUSD, sum.CostUSD+1e-9, "the root reports the children's usage it was told")
	for _, c := range all {
		checkJournal(t, h.store, c.ID)
	}
}

// TestTreeBudgetWarmUpThenSpike: children warm the tree up with cheap
// calls, then each makes one dear call at once (a hostile model asking for
// its longest answer). A call whose answer is unbounded runs alone, so the
// tree passes its limit by one call at most.
func TestTreeBudgetWarmUpThenSpike(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t, childStep(0.001, 100, true), childStep(0.5, 100, false)), "read_file")
	s := create(t, h, treeRoot(t, 6, child), &lt.Budget{MaxCostUSD: 1})
	sum, all := spendOfTree(t, h.store, h.eng, s.ID)
	t.Logf("the tree spent %v in %d sessions", sum.CostUSD, len(all))
	require.LessOrEqual(t, sum.CostUSD, 1.0+0.5+1e-9, "the tree spent at most its root's limit plus one call")
	requireLedgerMatches(t, h.store, s.ID, sum)
	for _, c := range all {
		checkJournal(t, h.store, c.ID)
	}
}

// TestTreeBudgetParallelChildrenTokens: the same for tokens.
func TestTreeBudgetParallelChildrenTokens(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t, childStep(0, 200, true), childStep(0, 200, false)), "read_file")
	s := create(t, h, treeRoot(t, 6, child), &lt.Budget{MaxTokens: 1000})
	sum, all := spendOfTree(t, h.store, h.eng, s.ID)
	require.LessOrEqual(t, sum.Tokens, int64(1000+200), "at most the limit plus one step")
	requireLedgerMatches(t, h.store, s.ID, sum)
	requireTreeExceeded(t, h, all, s.ID, "tokens")
}

// TestTreeBudgetParallelChildrenCalls: model calls and tool calls never
// go past the root's limits, whatever the children ask for.
func TestTreeBudgetParallelChildrenCalls(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget lt.Budget
		check  func(t *testing.T, sum treeSpend)
	}{
		{"model_calls", lt.Budget{MaxModelCalls: 9}, func(t *testing.T, sum treeSpend) {
			require.LessOrEqual(t, sum.ModelCalls, int64(9+1))
		}},
		{"tool_calls", lt.Budget{MaxToolCalls: 4}, func(t *testing.T, sum treeSpend) {
			require.LessOrEqual(t, sum.ToolCalls, int64(4+1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			steps := []any{childStep(0, 10, true), childStep(0, 10, true), childStep(0, 10, true), childStep(0, 10, false)}
			child := childSpec(script(t, steps...), "read_file")
			// Each child asks for the parent's whole budget: the shares
			// refuse all but what is left, and the ledger holds the tree.
			spawn := func(i int) any {
				return toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "part", "budget": map[string]any{"max_model_calls": 9, "max_tool_calls": 4}})
			}
			own := map[string]any{"input_tokens": 10, "output_tokens": 0}
			root := spec(t, script(t,
				map[string]any{"tool_calls": []any{spawn(0), spawn(1), spawn(2), spawn(3)}, "usage": own},
				map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}, "usage": own},
				map[string]any{"text": "done", "usage": own},
			), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "read_file"})
			s := create(t, h, root, &tc.budget)
			sum, _ := spendOfTree(t, h.store, h.eng, s.ID)
			tc.check(t, sum)
			requireLedgerMatches(t, h.store, s.ID, sum)
		})
	}
}

// TestTreeBudgetGrandchildren: a child that spawns grandchildren draws on
// the same ledger: the whole tree, at any depth, spends at most the root's
// limit plus one step.
func TestTreeBudgetGrandchildren(t *testing.T) {
	h := newHarness(t)
	grandchild := childSpec(script(t, childStep(0.25, 10, true), childStep(0.25, 10, false)), "read_file")
	var spawns []any
	for range 3 {
		spawns = append(spawns, toolCall("spawn_agent", map[string]any{"agent_spec": grandchild, "input": "do a piece"}))
	}
	child := childSpec(script(t,
		map[string]any{"tool_calls": spawns, "cost_usd": 0.01},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}, "cost_usd": 0.01},
		map[string]any{"text": "pieces done", "cost_usd": 0.01},
	), "spawn_agent", "wait_agents", "read_file")
	s := create(t, h, treeRoot(t, 3, child), &lt.Budget{MaxCostUSD: 1})
	sum, all := spendOfTree(t, h.store, h.eng, s.ID)
	require.Greater(t, len(all), 4, "grandchildren ran")
	require.LessOrEqual(t, sum.CostUSD, 1.0+0.25+1e-9)
	requireLedgerMatches(t, h.store, s.ID, sum)
	requireTreeExceeded(t, h, all, s.ID, "cost_usd")
}

// TestTreeBudgetVerificationReserves: the call that verifies a root's
// final answer reserves in its tree's ledger as its step's call does. The
// root spawns a child that spends past its share in its one step (a share
// lets one step past) and then waits, and answers with the call the tree
// lets cross its limit. The root's own check before the verification
// counts the child's share, not what the child spent, and lets it go:
// only the ledger knows that the tree spent its limit. Before, the
// verification was left out of the ledger and ran: the tree spent its
// limit plus two calls, and the answer was verified past it.
func TestTreeBudgetVerificationReserves(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	child := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("wait_for_signal", map[string]any{"name": "never"})}, "cost_usd": 0.5},
	), "wait_for_signal")
	const verdict = `{"criteria":[{"criterion":"names the parts","met":true,"reason":"it does"}]}`
	root := spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "spend", "budget": map[string]any{"max_cost_usd": 0.3}}),
			toolCall("wait_for_signal", map[string]any{"name": "go"}),
		}, "cost_usd": 0.01},
		map[string]any{"text": "all parts done", "cost_usd": 0.6},
		map[string]any{"text": verdict, "cost_usd": 0.5},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_for_signal"})
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: root, Input: "do it in parts", AcceptanceCriteria: []string{"names the parts"}, Budget: &lt.Budget{MaxCostUSD: 1},
	})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionWaiting)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	h.waitStatus(kids[0].ID, lt.SessionWaiting)
	_, err = h.eng.SendSignal(ctx, s.ID, &lt.SignalRequest{Name: "go"})
	require.NoError(t, err)

	sum, all := spendOfTree(t, h.store, h.eng, s.ID)
	require.LessOrEqual(t, sum.CostUSD, 1.0+0.6+1e-9, "the tree spent at most its root's limit plus one call")
	requireTreeExceeded(t, h, all, s.ID, "cost_usd")
	require.Len(t, events(t, h, s.ID, lt.EventModelResponded), 2, "the root answered")
	require.Empty(t, events(t, h, s.ID, lt.EventAcceptanceVerified), "its answer was not verified past the tree's limit")
	requireLedgerMatches(t, h.store, s.ID, sum)
	for _, c := range all {
		checkJournal(t, h.store, c.ID)
	}
}

// TestTreeBudgetRaisedByPatch: a root's budget raised while its tree runs
// reaches the ledger at once, and a tree within its limits runs to the end
// with every call settled.
func TestTreeBudgetRaisedByPatch(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t, childStep(0.1, 10, true), childStep(0.1, 10, false)), "read_file")
	s := create(t, h, treeRoot(t, 2, child), &lt.Budget{MaxCostUSD: 5})
	raised := 7.0
	_, err := h.eng.UpdateBudget(context.Background(), s.ID, &lt.BudgetPatch{MaxCostUSD: &raised})
	require.NoError(t, err)
	sum, all := spendOfTree(t, h.store, h.eng, s.ID)
	for _, c := range all {
		require.Equal(t, lt.SessionIdle, c.Status, "session %s: %s", c.ID, c.StopReason)
	}
	require.InDelta(t, 0.03+4*0.1, sum.CostUSD, 1e-9)
	requireLedgerMatches(t, h.store, s.ID, sum)
	l, err := h.store.TreeBudgetGet(context.Background(), s.ID)
	require.NoError(t, err)
	require.Equal(t, 7.0, l.Limits.CostUSD)
	require.Equal(t, int64(5), l.SettledCalls-1, "the root's later calls and its children's four (the first was before the ledger)")
}

// TestTreeBudgetTwoNodesPostgres: the children of one tree run on two
// engines (two nodes) sharing one PostgreSQL database; the ledger holds
// across them.
func TestTreeBudgetTwoNodesPostgres(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	dir := t.TempDir()
	clock := &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	var engines []*engine.Engine
	for _, node := range []string{"node-a", "node-b"} {
		eng, err := engine.New(st, &engine.Config{
			WorkspaceRoot: filepath.Join(dir, "workspaces"), NodeID: node, Clock: clock,
			Providers: map[string]model.Provider{"scripted": scripted.New(nil)}, PollInterval: 10 * time.Millisecond,
		})
		require.NoError(t, err)
		require.NoError(t, eng.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = eng.Stop(stopCtx)
		})
		engines = append(engines, eng)
	}
	child := childSpec(script(t, childStep(0.3, 100, true), childStep(0.3, 100, false)), "read_file")
	s, err := engines[0].CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: treeRoot(t, 6, child), Input: "go", Budget: &lt.Budget{MaxCostUSD: 1}})
	require.NoError(t, err)
	sum, all := spendOfTree(t, st, engines[1], s.ID)
	require.GreaterOrEqual(t, len(all), 3)
	require.LessOrEqual(t, sum.CostUSD, 1.0+0.3+1e-9)
	requireLedgerMatches(t, st, s.ID, sum)
	nodes := map[string]bool{}
	for _, c := range all {
		evs, err := st.EventList(ctx, c.ID, 0, 10000)
		require.NoError(t, err)
		for _, ev := range evs {
			if ev.WorkerID != "" {
				nodes[ev.WorkerID] = true
			}
		}
	}
	t.Logf("workers of the tree: %v", nodes)
}

// TestMonitorTreeTwoNodesPostgres: four children of one tree, on two
// engines sharing one PostgreSQL database, each send a quarter of a vault
// value toward a listed host. The tree's monitor record, updated by
// whichever node runs each child, joins them: exactly one finding in the
// tree (two quarters or three make half of it; what is left after is
// under half), whatever the order the children ran in.
func TestMonitorTreeTwoNodesPostgres(t *testing.T) {
	const secret = "s3cr3t-vault-value-0123456789abcdef"
	dsn := pgtest.FreshSchema(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(ctx))
	dir := t.TempDir()
	clock := &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	vault := &fakeVault{secrets: map[string]struct{ value, host string }{"DB_PASSWORD": {secret, "127.0.0.1"}}}
	var engines []*engine.Engine
	for _, node := range []string{"node-a", "node-b"} {
		eng, err := engine.New(st, &engine.Config{
			WorkspaceRoot: filepath.Join(dir, "workspaces"), NodeID: node, Clock: clock, Vault: vault,
			Providers: map[string]model.Provider{"scripted": scripted.New(nil)}, PollInterval: 10 * time.Millisecond,
		})
		require.NoError(t, err)
		require.NoError(t, eng.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = eng.Stop(stopCtx)
		})
		engines = append(engines, eng)
	}
	var spawns []string
	for _, part := range []string{secret[:9], secret[9:18], secret[18:27], secret[27:]} {
		send := `{"tool_calls":[` + httpCall("http://127.0.0.1:9/collect?p="+part, "") + `]}`
		child := `{"model":{"provider":"scripted","script":[` + send + `,{"text":"sent"}]},"tools":[{"name":"http_request"}],"environment":{"network":{"allow":["127.0.0.1"]}}}`
		spawns = append(spawns, `{"name":"spawn_agent","arguments":{"agent_spec":`+child+`,"input":"send"}}`)
	}
	sp := spec(t, calls(t, append(spawns, `{"name":"wait_agents","arguments":{}}`)...),
		lt.ToolSpec{Name: "http_request"}, lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	sp.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}}}
	sp.Monitor = allLog()
	s, err := engines[0].CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
	require.NoError(t, err)
	_, all := spendOfTree(t, st, engines[1], s.ID)
	require.Len(t, all, 5)
	var found []lt.MonitorFindingData
	nodes := map[string]bool{}
	for _, c := range all {
		evs, err := st.EventList(ctx, c.ID, 0, 10000)
		require.NoError(t, err)
		for _, ev := range evs {
			if ev.WorkerID != "" && c.ID != s.ID {
				nodes[ev.WorkerID] = true
			}
			if ev.Type == lt.EventMonitorFinding {
				var d lt.MonitorFindingData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				require.NotEqual(t, s.ID, c.ID, "the parent sent nothing")
				found = append(found, d)
			}
		}
	}
	require.Len(t, found, 1, "one finding across the tree: %+v", found)
	require.Equal(t, "secret_like_egress", found[0].Detector)
	require.NotEmpty(t, found[0].TreeEvidence)
	t.Logf("children ran on %v; %s", nodes, found[0].Summary)
}

// TestTreeBudgetRaisedByABudgetAction: a person who approves a root's
// budget action with new limits raises its tree's ledger at once, as a
// PATCH of the budget does: running children are held to the new limits
// before the root calls again (here it does not: it is paused). The soft
// threshold approved past is cleared as the check counts it, the
// children's soft shares included: the root asks once. Before, it asked
// again at once, each time it was approved. Its children, which got
// nothing left to spend unasked, each ask once too.
func TestTreeBudgetRaisedByABudgetAction(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	child := childSpec(script(t, childStep(0.1, 10, true), childStep(0.1, 10, false)), "read_file")
	// The root's first step (its spawns) costs 0.01: past its threshold.
	s := create(t, h, treeRoot(t, 2, child), &lt.Budget{MaxCostUSD: 5, SoftCostUSD: 0.005})
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionBudget, act.Type)
	_, err := h.eng.PauseSession(ctx, s.ID, &lt.PauseRequest{})
	require.NoError(t, err)
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove, Budget: &lt.Budget{MaxCostUSD: 7}})
	require.NoError(t, err)
	l, err := h.store.TreeBudgetGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, 7.0, l.Limits.CostUSD, "the ledger holds the approved limit")
	resume(t, h, s.ID)

	kids := children(t, h, s.ID)
	require.Len(t, kids, 2)
	for _, k := range kids {
		k := h.waitStatus(k.ID, lt.SessionRequiresAction)
		require.Len(t, k.RequiredActions, 1)
		require.Equal(t, lt.ActionBudget, k.RequiredActions[0].Type, "the child asks at its soft share")
		_, err := h.eng.DecideAction(ctx, k.ID, k.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionApprove})
		require.NoError(t, err)
	}
	sum, all := spendOfTree(t, h.store, h.eng, s.ID)
	for _, c := range all {
		require.Equal(t, lt.SessionIdle, c.Status, "session %s", c.ID)
		require.Len(t, events(t, h, c.ID, lt.EventActionRequired), 1, "session %s asked once", c.ID)
	}
	requireLedgerMatches(t, h.store, s.ID, sum)
}

// TestSoftThresholdSharedWithChildren: a root that may spend 0.05 without
// asking spawns a child whose steps cost 0.30: the child gets a share of
// the root's soft threshold, and asks a person at it (after its first
// step, as a hard share lets one step past), instead of spending 1.20
// unasked. Before, soft thresholds were not given to children at all.
func TestSoftThresholdSharedWithChildren(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t, childStep(0.3, 10, true), childStep(0.3, 10, true), childStep(0.3, 10, true), childStep(0.3, 10, false)), "read_file")
	s := create(t, h, treeRoot(t, 1, child), &lt.Budget{SoftCostUSD: 0.05})
	var kids []lt.Session
	for deadline := time.Now().Add(10 * time.Second); len(kids) == 0; {
		require.False(t, time.Now().After(deadline), "no child was spawned")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
		kids = children(t, h, s.ID)
	}
	require.Len(t, kids, 1)
	kid := h.waitStatus(kids[0].ID, lt.SessionRequiresAction)
	require.Len(t, kid.RequiredActions, 1)
	a := kid.RequiredActions[0]
	require.Equal(t, lt.ActionBudget, a.Type)
	require.Equal(t, "cost_usd", a.Limit.Name)
	require.Positive(t, kid.Budget.SoftCostUSD)
	require.Less(t, kid.Budget.SoftCostUSD, 0.05, "a share of what the root may spend unasked")
	require.InDelta(t, 0.3, kid.Usage.CostUSD, 1e-9, "one step, then it asked")
	root, err := h.eng.GetSession(context.Background(), s.ID)
	require.NoError(t, err)
	require.Less(t, root.Usage.CostUSD+kid.Usage.CostUSD, 0.05+0.3+1e-9, "the tree spent at most the threshold plus one step unasked")
	cancelNow(t, h, s.ID)
	requireCancelled(t, h, s.ID)
}

// TestChildKeepsItsOwnSoftThreshold: a configured agent whose spec asks a
// person at a lower threshold than its share of its parent's keeps its
// own, as it would as a session of its own; a threshold its hard share
// reaches first is dropped (it stops there, asking nobody).
func TestChildKeepsItsOwnSoftThreshold(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t, childStep(0.3, 10, true), childStep(0.3, 10, false)), "read_file")
	child["budget"] = map[string]any{"soft_cost_usd": 0.2, "soft_model_calls": 50}
	s := create(t, h, treeRoot(t, 1, child), &lt.Budget{SoftCostUSD: 5, MaxModelCalls: 40})
	var kids []lt.Session
	for deadline := time.Now().Add(10 * time.Second); len(kids) == 0; {
		require.False(t, time.Now().After(deadline), "no child was spawned")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
		kids = children(t, h, s.ID)
	}
	kid := h.waitStatus(kids[0].ID, lt.SessionRequiresAction)
	require.Equal(t, 0.2, kid.Budget.SoftCostUSD, "its own, lower than its share of 5")
	require.Zero(t, kid.Budget.SoftModelCalls, "its hard share of 40 comes first")
	require.Positive(t, kid.Budget.MaxModelCalls)
	require.Len(t, kid.RequiredActions, 1)
	require.Equal(t, "cost_usd", kid.RequiredActions[0].Limit.Name)
	cancelNow(t, h, s.ID)
	requireCancelled(t, h, s.ID)
}

// heldRootReserve holds the root's first reservation once its ledger
// exists, before it reaches the store (its limits, read from the journal,
// already in it), until released, and records the ledger's limits right
// after it.
type heldRootReserve struct {
	store.Store
	armed             atomic.Bool
	entered, released chan struct{}
	after             chan store.TreeAmounts
}

func (s *heldRootReserve) TreeReserve(ctx context.Context, p *store.TreeReserveParams) (*store.TreeReserveResult, error) {
	if p.Limits == nil || !s.armed.Load() {
		return s.Store.TreeReserve(ctx, p)
	}
	if _, err := s.Store.TreeBudgetGet(ctx, p.RootID); err != nil || !s.armed.CompareAndSwap(true, false) {
		return s.Store.TreeReserve(ctx, p) // no ledger yet: its first call after the spawn is held
	}
	close(s.entered)
	<-s.released
	res, err := s.Store.TreeReserve(ctx, p)
	if l, gerr := s.Store.TreeBudgetGet(ctx, p.RootID); gerr == nil {
		s.after <- l.Limits
	} else {
		s.after <- store.TreeAmounts{CostUSD: -1}
	}
	return res, err
}

// startRootHeldAtItsTreeCall starts a root with a budget of 5 that spawns
// a child asking a person, through a store (h.store wrapped by wrap, if
// set) that holds the root's first reservation in its tree's ledger
// (heldRootReserve), and returns once that reservation is held.
func startRootHeldAtItsTreeCall(t *testing.T, wrap func(store.Store) store.Store) (*harness, *heldRootReserve, *lt.Session) {
	t.Helper()
	held := &heldRootReserve{entered: make(chan struct{}), released: make(chan struct{}), after: make(chan store.TreeAmounts, 1)}
	h := newHarnessThrough(t, scripted.New(nil), 0, func(h *harness) store.Store {
		held.Store = h.store
		if wrap != nil {
			held.Store = wrap(h.store)
		}
		return held
	})
	held.armed.Store(true)
	s := create(t, h, treeRoot(t, 1, askingChild(t)), &lt.Budget{MaxCostUSD: 5})
	select {
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the root made no call after its ledger was opened")
	}
	return h, held, s
}

// TestTreeLimitsLoweredWhileTheRootsCallIsReserved: a person lowers the
// root's budget while the root's reservation, made with the limits of the
// journal its runner read before, is on its way to the ledger. The ledger
// keeps the person's limit: the root's older limits do not undo it, which
// would let its sub-agents spend to the old limit until its next call.
func TestTreeLimitsLoweredWhileTheRootsCallIsReserved(t *testing.T) {
	h, held, s := startRootHeldAtItsTreeCall(t, nil)
	ctx := context.Background()
	lower := 0.5
	_, err := h.eng.UpdateBudget(ctx, s.ID, &lt.BudgetPatch{MaxCostUSD: &lower})
	require.NoError(t, err)
	l, err := h.store.TreeBudgetGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, 0.5, l.Limits.CostUSD, "the PATCH reached the ledger")
	close(held.released)
	require.Equal(t, 0.5, (<-held.after).CostUSD, "the root's call with the limits read before the PATCH left them")
}

// lostTreeSync fails TreeBudgetPut while fail is set: a worker that died
// between a budget change's append and its sync to the tree's ledger.
type lostTreeSync struct {
	store.Store
	fail atomic.Bool
}

func (s *lostTreeSync) TreeBudgetPut(ctx context.Context, p *store.TreeBudgetPutParams) error {
	if s.fail.Load() {
		return errors.New("injected: the node died before the sync")
	}
	return s.Store.TreeBudgetPut(ctx, p)
}

// TestTreeLimitsOfALostSyncComeWithTheRootsNextCall: a budget change
// whose sync to the ledger was lost (its worker died between the append
// and the sync) reaches the ledger with the root's next call, which
// carries the limits of the journal its runner read, the change included
// (the call in flight was reserved on the journal read before it).
func TestTreeLimitsOfALostSyncComeWithTheRootsNextCall(t *testing.T) {
	lost := &lostTreeSync{}
	h, held, s := startRootHeldAtItsTreeCall(t, func(st store.Store) store.Store {
		lost.Store = st
		return lost
	})
	ctx := context.Background()
	lost.fail.Store(true)
	lower := 0.5
	_, err := h.eng.UpdateBudget(ctx, s.ID, &lt.BudgetPatch{MaxCostUSD: &lower})
	require.ErrorContains(t, err, "the node died before the sync")
	lost.fail.Store(false)
	close(held.released)
	require.Equal(t, 5.0, (<-held.after).CostUSD, "the sync was lost, and the held call read the journal before the change")
	// The child's answer lets the root call its model again.
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	k := h.waitStatus(kids[0].ID, lt.SessionRequiresAction)
	_, err = h.eng.DecideAction(ctx, k.ID, k.RequiredActions[0].ID, &lt.Decision{Answer: "blue"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	l, err := h.store.TreeBudgetGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, 0.5, l.Limits.CostUSD, "the root's next call carried the change")
}
