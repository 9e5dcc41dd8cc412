// Package monitor is the trajectory monitor's built-in detectors: each reads
// a session's journal as it grows, one event at a time, and reports a
// finding when a pattern shows across calls that no single call shows —
// repeated refused connections, probes for secrets, refused capability
// widening, sandbox-escape signatures, secret-like strings sent toward
// hosts, the same failing action retried. It also holds what is pure about
// the model monitor (review.go): the trajectory summary a second model
// reads, its prompt, and the strict reading of its verdict.
//
// Invariants:
//   - Observe is incremental: a Monitor keeps a small state (windows of
//     recent hits, bounded maps) updated per event, never the journal; its
//     state encodes to JSON (State/Restore) so a worker that claims the
//     session starts from a snapshot and replays only the events after it;
//   - a finding never holds a secret's value or a fragment of one: the
//     fragments of the vault's values are held as hashes, in memory only
//     (SecretIndex), and a finding names a secret by its name;
//   - a finding already journaled (monitor.finding, observed like any
//     event) is not reported again when a replay finds it anew (Journaled),
//     and two findings of one detector on one event are both reported;
//   - what must be counted across a tree of sub-agents (a secret's
//     fragments, refused connections, probes) is also kept as
//     contributions for the tree's record (tree.go), applied by the engine
//     once their events are durable; applying them again (a replay) adds
//     nothing, and the record too holds positions and seqs, never bytes;
//   - a spawn_agent call's arguments are not read (the child's own calls
//     are, in its journal), and a monitor with every detector off does no
//     work.
//
// It imports only the standard library and longhaultype. Who may import it:
// internal/engine and tests.
package monitor
