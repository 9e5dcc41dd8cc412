// Package engine runs Longhaul's durable sessions: it implements the API's
// operations (server.Backend), schedules runnable sessions onto a bounded pool
// of workers under leases, and runs the turn loop of DESIGN.md with its
// side-effect ledger.
//
// Invariants:
//   - every state change is an event appended with the projection it causes,
//     in one store transaction (writer.go); nothing lives only in memory;
//   - a worker appends only under its lease (owner, epoch); losing the lease
//     stops it before it writes or runs anything else;
//   - an effect is in the ledger (tool.started, durable) before a tool that is
//     not read-only runs; after a crash, read and idempotent calls run again
//     (with the same idempotency key) and an irreversible one becomes an
//     in-doubt required action that only a decision can settle;
//   - a session that waits for a required action holds no goroutine, no
//     worker and no lease: it is a row that a decision makes runnable.
//
// It imports the store interface, journal, model, tool and workspace; only
// cmd wires concrete drivers and providers into it.
package engine
