// Package bench measures the engine's core loop on a real store: agent steps
// per second for one session in sequence and for many concurrent sessions,
// per-step overhead percentiles, store commits per step, and the memory that
// thousands of sessions waiting (on a required action, a timer or a
// signal) hold; and the latency of an in-flight control (a cancel, a steer
// with interrupt) from its request to its effect in the journal while many
// sessions are in a model call, each request taken by a node that does not
// run the session when there are several (control.go).
//
// It drives the real engine with the scripted provider and a no-op read
// tool, so what it measures is Longhaul's own overhead: journal appends
// (with synchronous=FULL), projections, leases and scheduling. It runs on
// an embedded SQLite store, or on PostgreSQL in a temporary schema it
// creates and drops, with one engine or several (separate node ids and
// connection pools against the one schema, as separate nodes would). The
// `longhaul bench` command prints its report; benchmarks in this package
// run the same code under `go test -bench`.
//
// Its scenarios measure the cost of real work: a large workspace
// (workspace.go: a tree copied in, then write_file and shell steps), a
// long session parked and compacted (long.go), many sessions active at
// once against a slow model (active.go), and many subscribers of one
// session's event stream over a real node's HTTP API (watchers.go). They
// use a bench-local model (model.go) whose spec does not grow with the
// steps and which can answer after a latency.
//
// The watchers run's clients run in a process of their own
// (watchclients.go): the bench binary, re-executed in a hidden mode that
// runs ServeWatcherClients, so that they do not share the server's Go
// runtime and the server's CPU is counted apart from theirs.
//
// It imports the engine, the wire types (events' payloads, to read an
// effect), the scripted provider, both storage drivers, pgx (to create
// and drop its schema) and internal/node (the watchers run serves a node's
// API); the bench command runs it. Who may import it: cmd/longhaul and
// tests.
package bench
