// Package store defines the storage driver interface that the engine and the
// server are written against, its parameter structs and its sentinel errors.
//
// Drivers (store/sqlite, store/postgres) own their SQL, their migrations
// and the mapping of their errors to the sentinels below; store/storeutil
// holds what they share that is not SQL. The conformance suite in
// store/storetest runs against every driver.
//
// The model: a session row holds the session's projection (an opaque JSON
// document written by the engine), its lease and its wake condition; the events
// table is the journal. Every write that adds events goes through EventAppend,
// which appends the events with the next gap-free seqs AND writes the new
// projections in one transaction, conditional on the seq the caller last saw
// (optimistic concurrency) and, for workers, on the lease epoch it holds
// (fencing). Nothing else changes a session. A tree of sub-agents shares a
// budget ledger beside its sessions (treebudget.go), which an append may
// settle in its transaction.
//
// This package imports only the standard library. Who may import it: the
// root package, cmd/longhaul, internal/app, internal/bench, internal/engine,
// internal/export, internal/freespace, internal/metrics, internal/node,
// internal/otelexport, internal/report, internal/runner/hub, internal/server,
// internal/store/postgres, internal/store/sqlite, internal/store/storetest,
// internal/store/storeutil, internal/vault, internal/webhook and tests.
package store
