// Package trace derives a session's trace (longhaultype.Trace) from its
// journal: turns, steps, model calls, tool calls, required actions, waits
// and sub-agents as a tree of spans with their start and end times,
// durations, tokens and cost.
//
// Invariants:
//   - A trace is a pure function of the journal (DESIGN.md principle 9):
//     Build reads nothing but the events it is given (and, on request, the
//     journals of sub-agents through a callback) and never the clock, so
//     the same journal always gives the same trace, span ids included.
//   - Usage rolls up as the journal's projection counts it, so a turn
//     span's usage equals the turn's usage in the API and the trace's total
//     the session's: a model call carries its own tokens and cost; a step
//     sums its model calls (and counts its tool executions); a turn sums its
//     steps, the compaction and verification calls made for it, and what
//     sub-agents reported while it was the current turn (each report is
//     cumulative: the turn gets the difference). A sub-agent span carries
//     the child's whole tree as it last reported; it is not added again.
//   - Spans still open when the journal ends have no end; their duration
//     runs to the time of the last event. When a turn ends, whatever it left
//     open (a pending action, a wait, a call cut short) is closed at the
//     turn's end as cancelled; sub-agents may outlive the turn that spawned
//     them.
//   - Events are expected to be complete (payloads moved to blobs read
//     back): Build decodes each payload it uses and fails on one it cannot
//     decode rather than guess.
//
// It imports only the wire types (the journal's payload types among them).
// The engine serves it (GET /v1/sessions/{id}/trace). Who may import it:
// internal/engine and tests.
package trace
