// Package report computes task reports (GET /v1/reports/tasks, longhaul
// report): per task, how the work went and what it cost, and across tasks
// the acceptance rate, the cost per accepted task and the human asks per
// task, with a time series for a chart.
//
// A task is a session. By default only root sessions are tasks, each with
// its sub-agents' cost already rolled into its usage (a sub-agent's usage
// rolls up when its turn ends); with IncludeSubagents every session is a
// task, and totals then count each session's own cost once, so a parent's
// rolled-up sub-agent cost is not counted twice. The window holds the
// tasks created in [since, until).
//
// Definitions (also in the README):
//   - asks: required actions that needed a person: approvals, inputs
//     (ask_human), in-doubt effects and budgets. Function calls are
//     answered by the application, not a person, and are not asks.
//   - input_complete: the task never asked for information (no input
//     action).
//   - retries: failed model and tool attempts that were tried again.
//   - cost per accepted task: the cost of every task of the window,
//     whatever became of it, divided by the accepted tasks. Failed,
//     rejected and unreviewed attempts cost money too, and what was
//     accepted carries them; dividing only the accepted tasks' own cost
//     would flatter a system that needs many attempts.
//   - acceptance rate: accepted / reviewed; unreviewed tasks are neither.
//   - a fork's usage, asks and retries are its own: what it copied from
//     its origin counts in the origin's record.
//   - approval fatigue (fatigue.go): per policy rule, its asks, the
//     approve rate and the median time to decide, summed from each
//     session's journal.RuleApprovals; a rule approved every time over at
//     least Config.RelaxAfterAsks asks is flagged to relax, and a rule
//     whose allowed or approved call the trajectory monitor flagged (a
//     monitor.finding's evidence names the call's events; linked in each
//     session's journal.Tally.Tighten) is flagged to tighten, with the
//     detector and the call in its reason (Config.ToTighten may add more).
//
// Everything is read from the projections (the session rows' states, see
// journal.Tally), never from journals: one indexed scan of the window's
// session rows, at most Config.MaxTasks of them, for the totals, the
// series and the page alike.
//
// It imports the store interface, the journal's projection types, apierror
// and the wire types; the node wires a Service into the application service
// (internal/app). Who may import it: internal/app, internal/node and
// tests.
package report
