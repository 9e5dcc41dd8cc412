package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A tree of sub-agents spends at most its root's limits plus one call in
// all (API.md, "Containment"). Each session's own check before a step
// (budget.go) sees only its own share, and a step's cost is known only
// after it: six children of a one-dollar root whose steps cost 0.3 each
// checked their shares of 0.14, all went, and the tree spent 1.82. So,
// beside the shares, every model and tool call of a session in a tree
// reserves in the tree's ledger in the store before it starts (one round
// trip; the rule is storeutil.TreeDecide, decided atomically with every
// other node's reservations), and its real usage is settled in the
// transaction of the append that journals it (runner.flush). A crossing
// call runs alone, so only one call of the whole tree ever crosses a limit;
// a call the tree cannot afford ends the session's turn with
// budget_exceeded, naming the tree. Soft limits stay per session.

// Waits of a call that would cross a limit while other calls of the tree
// are in flight: short at first, since a model call usually settles within
// seconds.
const (
	treeBusyFirstWait = 50 * time.Millisecond
	treeBusyMaxWait   = time.Second
)

// treeLedger is a runner's part in its tree's ledger.
type treeLedger struct {
	// settled is the session's own usage the ledger has (as of the last
	// durable append): each append settles what its events add to it.
	settled store.TreeAmounts
	// done are reservations whose calls ended: released by the next append,
	// which carries their usage. held is the model call's reservation while
	// the call runs.
	done []string
	held string
	// missing: the tree has no ledger (made before ledgers existed); only
	// the shares bind it.
	missing bool
	// opened: this runner opened (or updated) its tree's ledger.
	opened bool
	// toolsLimited: the ledger limited tool calls when last seen; tool
	// calls reserve only then.
	toolsLimited bool
	busyWait     time.Duration
}

func newTreeLedger(st *journal.State) *treeLedger {
	return &treeLedger{settled: ownUsage(st), toolsLimited: true}
}

// inTree reports whether the session is part of a tree of sub-agents: a
// child, or a session that spawned some.
func inTree(st *journal.State) bool {
	return st.Session.ParentID != nil || len(st.Children) > 0
}

// treeRoot is the id of the root of the session's tree (a sub-agent works
// in its root's workspace).
func treeRoot(st *journal.State) string {
	if st.Session.ParentID == nil {
		return st.Session.ID
	}
	return st.WorkspaceID()
}

// ownUsage is what the session's own calls used: its usage without what
// its children's reports rolled up (the ledger has that from the children).
func ownUsage(st *journal.State) store.TreeAmounts {
	u := st.Session.Usage
	for _, c := range st.Children {
		u.Sub(c.Usage)
	}
	return amountsOf(u)
}

func amountsOf(u lt.Usage) store.TreeAmounts {
	return store.TreeAmounts{CostUSD: u.CostUSD, Tokens: u.InputTokens + u.OutputTokens, ModelCalls: u.ModelCalls, ToolCalls: u.ToolCalls}
}

// limitsOf are a budget's hard limits as the ledger keeps them.
func limitsOf(b lt.Budget) store.TreeAmounts {
	return store.TreeAmounts{CostUSD: b.MaxCostUSD, Tokens: b.MaxTokens, ModelCalls: b.MaxModelCalls, ToolCalls: b.MaxToolCalls}
}

// treeSettle is what the next append settles in the ledger: the calls that
// ended and the usage the batch adds (nil when there is nothing).
func (r *runner) treeSettle() *store.TreeSettle {
	t := r.tree
	if t == nil || t.missing || !inTree(r.st) {
		return nil
	}
	used := ownUsage(r.st)
	used.CostUSD -= t.settled.CostUSD
	used.Tokens -= t.settled.Tokens
	used.ModelCalls -= t.settled.ModelCalls
	used.ToolCalls -= t.settled.ToolCalls
	// Usage only grows; a rounding residue of the cost is not spending.
	used.CostUSD = max(used.CostUSD, 0)
	used.Tokens, used.ModelCalls, used.ToolCalls = max(used.Tokens, 0), max(used.ModelCalls, 0), max(used.ToolCalls, 0)
	if used.IsZero() && len(t.done) == 0 {
		return nil
	}
	return &store.TreeSettle{RootID: treeRoot(r.st), Release: t.done, Used: used}
}

// treeSettled records that an append carrying s committed.
func (r *runner) treeSettled(s *store.TreeSettle) {
	if s == nil || r.tree == nil {
		return
	}
	r.tree.settled = ownUsage(r.st)
	r.tree.done = nil
}

// openTreeLedger creates the ledger of the tree this root session starts
// by spawning its first sub-agent, from its usage so far, or brings an
// existing ledger's limits up to date. Everything pending is made durable
// first, so that the ledger starts from a usage no later append counts
// again.
func (r *runner) openTreeLedger(ctx context.Context) error {
	if r.st.Session.ParentID != nil || r.tree.opened {
		return nil // a sub-agent (its root opened the ledger), or opened before
	}
	if err := r.flush(ctx, false); err != nil {
		return err
	}
	err := r.e.store.TreeBudgetPut(ctx, &store.TreeBudgetPutParams{
		RootID: r.st.Session.ID, Limits: limitsOf(r.st.Session.Budget), LimitsSeq: r.durableSeq,
		Spent: amountsOf(r.st.Session.Usage), Now: r.e.clock.Now(),
	})
	if err != nil {
		return fmt.Errorf("open the tree's budget ledger: %w", err)
	}
	r.tree.settled, r.tree.missing, r.tree.opened = ownUsage(r.st), false, true
	return nil
}

// reserveModelCall reserves a model call (a step's, a compaction's, a
// verification's or the monitor's: every call invoke makes) in the tree's
// ledger before it starts. It reports whether the call may start: when
// not, the turn ended (the tree's budget is spent) or the call waits for
// the tree's calls in flight, and the next tick tries again. A
// verification call is no exception: the session's own budget is checked
// before it too (verify), and one left out of the ledger ran beside the
// call the tree let cross its limit, or after the tree had spent it.
func (r *runner) reserveModelCall(ctx context.Context, spec lt.ModelSpec, purpose string, pos, attempt, contextTokens int) (bool, error) {
	// What the call can use at most: its input, and the longest answer it
	// can get — what the spec allows, else what the model's context window
	// leaves. The estimate must be a bound, never a guess: a hostile model
	// warms the tree up with cheap calls, then has every child ask for the
	// longest answer at once.
	out, bounded := int64(spec.MaxOutputTokens), true
	if out == 0 {
		w := model.ContextWindow(spec)
		out, bounded = int64(w-contextTokens), w > contextTokens
	}
	most := lt.Usage{InputTokens: int64(contextTokens), OutputTokens: max(out, 0)}
	hint := store.TreeAmounts{Tokens: most.InputTokens + most.OutputTokens, CostUSD: model.CostOf(spec, most)}
	id := derivedID("tres_", r.st.Session.ID, "model", pos, attempt)
	if purpose == lt.PurposeMonitor {
		// The monitor's calls count their own positions.
		id = derivedID("tres_", r.st.Session.ID, "monitor", pos, attempt)
	}
	// A session's first call may cost nothing like the tree's calls so
	// far (another model, a longer context), and a call with no bound on
	// its answer (no max_output_tokens, no known context window) may cost
	// anything: such calls run alone.
	unknown := ownUsage(r.st).ModelCalls == 0 || !bounded
	ok, err := r.reserveTree(ctx, store.TreeCallModel, id, hint, unknown)
	if ok && err == nil && r.tree != nil && inTree(r.st) && !r.tree.missing {
		r.tree.held = id
	}
	return ok, err
}

// modelCallEnded marks the model call's reservation for release with the
// append that journals the call's outcome (or, if none comes, with the
// next one: a call abandoned is made again under a new reservation).
func (r *runner) modelCallEnded() {
	if t := r.tree; t != nil && t.held != "" {
		t.done = append(t.done, t.held)
		t.held = ""
	}
}

// reserveToolCall reserves a tool call in the tree's ledger before it
// starts; it is settled with the append that carries its tool.started
// (which counts it). It reports whether the call may start.
func (r *runner) reserveToolCall(ctx context.Context, c *journal.Call) (bool, error) {
	if t := r.tree; t != nil {
		root := r.st.Session.ParentID == nil
		if (root && r.st.Session.Budget.MaxToolCalls == 0) || (!root && !t.toolsLimited) {
			return true, nil // the root set no limit on tool calls
		}
	}
	id := derivedID("tres_", r.st.Session.ID, "tool", c.ID, r.st.Step.TurnID, r.st.Step.N, c.Index, c.Attempts)
	ok, err := r.reserveTree(ctx, store.TreeCallTool, id, store.TreeAmounts{}, false)
	if ok && err == nil && r.tree != nil && inTree(r.st) && !r.tree.missing {
		r.tree.done = append(r.tree.done, id)
	}
	return ok, err
}

func (r *runner) reserveTree(ctx context.Context, kind store.TreeCallKind, id string, hint store.TreeAmounts, unknown bool) (bool, error) {
	t := r.tree
	if t == nil || t.missing || !inTree(r.st) {
		return true, nil
	}
	if len(t.done) > 0 || ownUsage(r.st) != t.settled {
		// What this session spent so far goes into the ledger first: the
		// decision must see it, and its own ended calls must not hold the
		// tree.
		if err := r.flush(ctx, false); err != nil {
			return false, err
		}
	}
	// The same call reserved again (its request was dropped unsent and
	// made again: requestDurable) replaces its reservation, which the next
	// append must then not release: it is the call's in flight.
	t.done = slices.DeleteFunc(t.done, func(d string) bool { return d == id })
	p := &store.TreeReserveParams{
		RootID: treeRoot(r.st), ID: id, Lease: r.lease, Kind: kind, Hint: hint, Unknown: unknown, Now: r.e.clock.Now(),
	}
	p.Lease.PreviousOwner = ""
	if r.st.Session.ParentID == nil {
		// The root's budget is the tree's, as of the journal its runner
		// last read or wrote: a change written since (a PATCH, an
		// approval), which set the ledger's limits with its own seq,
		// stays.
		limits := limitsOf(r.st.Session.Budget)
		p.Limits, p.LimitsSeq = &limits, r.durableSeq
	}
	res, err := r.e.store.TreeReserve(ctx, p)
	switch {
	case errors.Is(err, store.ErrNotFound):
		t.missing = true
		r.e.log.Warn("sub-agent tree has no budget ledger: only the budget shares bind it", "session", r.st.Session.ID, "root", p.RootID)
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reserve a %s call in the tree's budget: %w", kind, err)
	}
	t.toolsLimited = res.Ledger.Limits.ToolCalls > 0
	switch res.Outcome {
	case store.TreeGranted:
		t.busyWait = 0
		return true, nil
	case store.TreeExceeded:
		return false, r.treeExceeded(res)
	}
	// Busy: the call would cross a limit while others are in flight. Wait
	// for them to settle, holding the lease (it is renewed meanwhile).
	t.busyWait = min(max(2*t.busyWait, treeBusyFirstWait), treeBusyMaxWait)
	select {
	case <-ctx.Done():
		return false, context.Cause(ctx)
	case <-r.e.clock.After(t.busyWait):
		return false, nil
	}
}

// treeExceeded ends the turn: the tree spent one of its root's limits.
func (r *runner) treeExceeded(res *store.TreeReserveResult) error {
	l := res.Ledger
	var limit, used float64
	switch res.Limit {
	case "cost_usd":
		limit, used = l.Limits.CostUSD, l.Spent.CostUSD
	case "tokens":
		limit, used = float64(l.Limits.Tokens), float64(l.Spent.Tokens)
	case "model_calls":
		limit, used = float64(l.Limits.ModelCalls), float64(l.Spent.ModelCalls)
	case "tool_calls":
		limit, used = float64(l.Limits.ToolCalls), float64(l.Spent.ToolCalls)
	}
	turn := r.st.CurrentTurn()
	if err := r.add(lt.EventBudgetExceeded, turn.ID, 0, lt.BudgetExceededData{Limit: res.Limit, Max: limit, Used: used, Tree: l.RootID}); err != nil {
		return err
	}
	return r.failTurn(lt.StopBudgetExceeded, fmt.Sprintf("the budget limit max_%s of the sub-agent tree of %s was reached (%g of %g spent by the whole tree)", res.Limit, l.RootID, used, limit))
}

// syncTreeLimits carries a root's new budget to its tree's ledger, if it
// has one, so that running sub-agents are held to it at once.
func (e *Engine) syncTreeLimits(ctx context.Context, s *lt.Session) error {
	if s.ParentID != nil {
		return nil
	}
	l, err := e.store.TreeBudgetGet(ctx, s.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	// The limits of the journal s was read at: a sync of an earlier
	// change that commits after this one leaves these.
	return e.store.TreeBudgetPut(ctx, &store.TreeBudgetPutParams{
		RootID: s.ID, Limits: limitsOf(s.Budget), LimitsSeq: s.LastEventSeq, Spent: l.Spent, Now: e.clock.Now(),
	})
}
