// Package longhaul embeds Longhaul, a durable task system for long-running
// AI agents, in a Go program: the engine runs in the program's process, on
// SQLite in a data directory or on PostgreSQL, with agents, tools and
// function handlers written in Go.
//
// Open starts a Runtime. Its methods are the HTTP API's operations (API.md)
// with the same names, parameters and results as package client's, so a
// program can move between an embedded engine and a remote server by
// changing one value. Each is the application service's (internal/app),
// the one the HTTP API serves, so the two cannot drift; a test holds the
// client, the Runtime and the service to one method set. (Subscribe, which
// follows a session's journal, is StreamEvents by its first name here.)
//
//	rt, err := longhaul.Open(ctx, longhaul.Options{
//		DataDir:   "longhaul-data",
//		Agents:    []longhaultype.PutAgentRequest{{Name: "billing", Spec: spec}},
//		Tools:     []*longhaul.GoTool{chargeCard},
//		Functions: []*longhaul.GoFunction{lookupCustomer},
//	})
//	if err != nil {
//		return err
//	}
//	defer rt.Close(context.Background())
//	s, err := rt.CreateSession(ctx, &longhaultype.CreateSessionRequest{Agent: "billing", Input: "Charge ACME for March"})
//	...
//	for ev, err := range rt.Subscribe(ctx, s.ID, 0) { ... }
//
// What it adds to the API:
//
//   - Tool makes a tool from a typed Go function: the JSON schema of its
//     arguments is derived from the input type, its output is marshalled
//     to JSON, and it declares its effect class. An irreversible tool may
//     carry a reconcile probe (WithReconcile), which settles a call whose
//     outcome a crash left unknown instead of a person.
//   - Function answers an application function tool in-process: the
//     runtime hands each of its pending function_call actions to the Go
//     function and decides the action with the result, durably (what was
//     pending when the process stopped is handed over at the next Open).
//   - StreamEvents (or Subscribe) follows a session's journal, resuming
//     from any seq; an event's payload decodes to its longhaultype type
//     (Event.DecodeData).
//   - Handler serves the HTTP API and the web UI of the runtime, for the
//     CLI and other programs.
//
// Invariants it keeps are the engine's (DESIGN.md): the journal is the
// truth and survives the process; a tool call is in the side-effect ledger
// before it runs; after a crash read and idempotent calls run again with
// the same idempotency key, irreversible ones only when their probe says
// they did not happen or a person decides. The runtime is wired like
// `longhaul serve` (internal/node), so both can share a store.
//
// The examples run as tests on SQLite in a temporary directory with the
// scripted model provider, so their output is deterministic.
//
// It imports longhaultype, client (for its error type and parameter types)
// and the internal packages (stores open through internal/node, never a
// driver directly). Programs import it. Who may import it: no package of the
// module (tests aside).
package longhaul
