// Package metrics exposes a node's Prometheus metrics (GET /metrics): what
// the sessions are doing, what the models and tools cost and how long they
// take, what waits for a person, and how the node's storage and webhooks
// behave. It uses its own prometheus.Registry, never the global one, so an
// embedding program's metrics and ours do not mix.
//
// Two kinds of metrics, kept apart on purpose:
//
//   - Counters and histograms of work are counted by the node that did it,
//     as its journal appends commit: Wrap decorates the store.Store the
//     engine and the webhook dispatcher write through, and every event a
//     committed EventAppend or SessionCreate carries is counted there, once
//     (model calls, tokens, cost, steps, tool calls, retries), along with
//     the append's own latency, the leases a claim took over and the
//     webhook delivery attempts recorded. Nothing is read back, and an
//     event written by another node never passes through this node's
//     store, so the counters of several nodes sharing one database add up
//     (sum them across instances). A write that fails (a conflict, a lost
//     lease) counts nothing but its latency.
//   - Gauges of state (sessions by status, pending required actions and
//     the age of the oldest of each type) are read from the store when
//     /metrics is scraped, with two grouped queries. They describe the
//     whole deployment, so every node reports the same values: take max()
//     across instances, not sum().
//
// Invariants: label values are bounded. Tool and model names come from
// agent specs that API clients write, so each label keeps the first
// Config.MaxLabelValues distinct values and folds later ones into "other";
// the provider of a model call in flight is remembered per session (the
// request and its response are separate appends) for at most
// maxInflightCalls calls. Events a fork copies from its origin are not
// counted again.
//
// It imports the store interface, the journal's payload types, the wire
// types and the Prometheus client. Who may import it: internal/node and
// tests.
package metrics
