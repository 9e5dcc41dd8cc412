package store

import "time"

// A tree of sessions (a root and the sub-agents it spawned, at any depth)
// shares its root's budget. Each session checks its own share before each
// call, but a call's real cost is known only after it, so parallel children
// each checking their own share could together overspend the root by one
// step per child. The tree ledger closes that: every model and tool call of
// the tree reserves its estimate in the ledger's rows before it starts, in
// one transaction that sees every other node's reservations, and the call's
// real usage is settled in the same transaction as the events that journal
// it (EventAppendParams.TreeSettle). The rule (TreeDecide in storeutil) lets
// a call start when the tree's spent, reserved and estimated amounts stay
// within the limits, or, when they would not, only as the one call of the
// tree in flight: so at most one call of the whole tree ever crosses a limit.

// TreeAmounts are amounts on the budget dimensions a tree shares.
type TreeAmounts struct {
	CostUSD    float64
	Tokens     int64
	ModelCalls int64
	ToolCalls  int64
}

// Add adds o to a.
func (a *TreeAmounts) Add(o TreeAmounts) {
	a.CostUSD += o.CostUSD
	a.Tokens += o.Tokens
	a.ModelCalls += o.ModelCalls
	a.ToolCalls += o.ToolCalls
}

// IsZero reports whether every amount is zero.
func (a TreeAmounts) IsZero() bool { return a == TreeAmounts{} }

// TreeCallKind is the kind of call a reservation is for.
type TreeCallKind string

// Call kinds: a model call reserves cost, tokens and one model call; a tool
// call one tool call.
const (
	TreeCallModel TreeCallKind = "model"
	TreeCallTool  TreeCallKind = "tool"
)

// TreeBudgetRow is the ledger of a tree, with its live reservations summed.
type TreeBudgetRow struct {
	RootID string
	// Limits are the root's hard limits (0: no limit on that dimension).
	Limits TreeAmounts
	// Spent is what the tree's settled calls used since the ledger was
	// created (created with the root's usage at that time).
	Spent TreeAmounts
	// MaxCall is the largest cost and token count of one settled model
	// call: the estimate of the next one. SettledCalls counts the settled
	// model calls (0: there is no estimate yet).
	MaxCall      TreeAmounts
	SettledCalls int64
	// Reserved sums the live reservations (a reservation lives while its
	// session's lease is the one it was made under); Exclusive is set when
	// one of them is a model call that started alone, as the call allowed
	// to cross a limit.
	Reserved  TreeAmounts
	Exclusive bool
	UpdatedAt time.Time
}

// TreeBudgetPutParams creates a tree's ledger or updates its limits.
type TreeBudgetPutParams struct {
	RootID string
	Limits TreeAmounts
	// LimitsSeq is the seq of the root's journal that Limits were read
	// at. The ledger keeps the limits of the latest seq it was given: a
	// write of older limits that commits after a newer one (a budget
	// change read before another, or the root's call made on a journal
	// read before a change) leaves the newer ones. Limits of the same seq
	// are the same journal's and replace them.
	LimitsSeq int64
	// Spent is the root's usage: a new ledger starts from it, an existing
	// one is raised to it if it is behind (never lowered).
	Spent TreeAmounts
	Now   time.Time
}

// TreeReserveParams asks to start one call of the tree.
type TreeReserveParams struct {
	RootID string
	// ID names the reservation; reserving an id that exists replaces it
	// (a retried reserve of the same call), and so does the session's
	// reservation of the same kind under another id: a session makes one
	// call of a kind at a time, so an earlier one is over, though its
	// lease lives on (a runner that started over under the same lease
	// and calls again as a new attempt).
	ID string
	// Lease is the reserving worker's lease on its session: the reservation
	// counts only while that session's lease is (Owner, Epoch), so a
	// crashed worker's reservation ends when another worker claims the
	// session (or the lease is released).
	Lease Lease
	Kind  TreeCallKind
	// Hint is what the caller knows of a model call before it starts (the
	// cost and tokens of its input); 0 where it knows nothing.
	Hint TreeAmounts
	// Unknown: the caller cannot vouch for the estimate (a session's first
	// model call, which may cost nothing like the tree's calls so far): the
	// call is treated as crossing, so it runs alone.
	Unknown bool
	// Limits, when set, replace the ledger's limits first (the root passes
	// its own budget with each of its calls), unless the ledger holds
	// limits of a later seq of the root's journal than LimitsSeq (see
	// TreeBudgetPutParams.LimitsSeq).
	Limits    *TreeAmounts
	LimitsSeq int64
	Now       time.Time
}

// TreeOutcome is the answer to a reservation.
type TreeOutcome string

// Outcomes of TreeReserve.
const (
	// TreeGranted: the call may start; its reservation holds until settled.
	TreeGranted TreeOutcome = "granted"
	// TreeBusy: the call would cross a limit and other calls of the tree
	// are in flight: try again once they settled.
	TreeBusy TreeOutcome = "busy"
	// TreeExceeded: the tree has spent a limit (Limit names it).
	TreeExceeded TreeOutcome = "exceeded"
)

// TreeReserveResult is TreeReserve's answer.
type TreeReserveResult struct {
	Outcome TreeOutcome
	// Limit names the dimension that was spent (TreeExceeded) or would be
	// crossed (TreeBusy, or TreeGranted with Exclusive): "cost_usd",
	// "tokens", "model_calls" or "tool_calls".
	Limit string
	// Exclusive: granted as the only call in flight, allowed to cross.
	Exclusive bool
	// Reserved is what the reservation holds (granted only).
	Reserved TreeAmounts
	// Ledger is the ledger the decision was made on, without this
	// reservation.
	Ledger TreeBudgetRow
}

// TreeSettle settles calls of a tree in the transaction of an append: the
// reservations of calls whose outcome the appended events record end, and
// the usage those events add is spent.
type TreeSettle struct {
	RootID string
	// Release are the reservations to end (unknown ids are ignored).
	Release []string
	// Used is the usage the appended events add to the session's own.
	Used TreeAmounts
}
