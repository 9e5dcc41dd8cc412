// Package node wires one Longhaul node in a process: the data directory
// (its lock, the node's id, the workspaces, the vault's key), the store
// (SQLite in the data directory, or PostgreSQL shared by several nodes) and
// its schema check, the vault, the sandbox, the metrics, the engine, the
// webhook dispatcher, the optional OpenTelemetry export, and the HTTP API
// handler that serves them. `longhaul serve` and `longhaul demo` run a node
// behind a listener; the root package (the Go library) runs one in the
// application's process. Both go through Open, Start and Close, so an
// embedded engine is wired exactly like a served one.
//
// Invariants it keeps:
//
//   - One process at a time holds a data directory (LockDataDir), so two
//     processes never run the sessions of one node id.
//   - A node never runs on a schema newer than this binary's, and on an
//     older one only after migrating it (or refuses, with NoMigrate):
//     CheckSchema is the one place that decides.
//   - The vault's key must decrypt every stored secret before anything
//     runs, or nothing could be redacted: Open fails otherwise.
//   - No session reaches the control plane: the database of StoreURL,
//     ControlPlaneAddrs and the listeners the caller reports with Serving
//     (announced in the store, where every node reads the others') are in
//     the engine's ControlPlane, which the egress proxy, http_request and
//     the check of a model's base_url refuse.
//   - Model keys named by api_key_env are the engine's defaults plus
//     ModelKeyEnv, each for its hosts.
//   - Close stops what started, in the reverse order: the engine (running
//     steps finish or stay resumable), the trace export, the webhook
//     dispatcher (pending deliveries stay in the outbox), then the store
//     and the lock.
//
// It imports the storage drivers so that its callers do not: cmd/longhaul
// and the root package import it, never a driver (their tests aside);
// internal/bench runs a node to measure the API's event streams. Who may
// import it: the root package, cmd/longhaul, internal/bench and tests. It never
// listens on a port: the caller serves Node.API.
// HTTPServer and LimitConnsPerIP build what a caller serves it with: an
// http.Server within HTTPLimits' timeouts, and a listener that caps the
// connections one client address holds.
package node
