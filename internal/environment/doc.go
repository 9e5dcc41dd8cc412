// Package environment is the seam between the engine and where a session's
// environment lives: its workspace, the sandbox its programs run in and
// its egress proxy. A Backend opens an Environment per workspace; the
// Environment runs commands (the shell tool), starts long-lived programs
// (MCP stdio servers), performs the file tools' reads, writes and
// listings, takes incremental, content-addressed snapshots and restores
// them, and can be stopped between activity periods (its workspace freed,
// once it is checked to be a snapshot) and recreated from that snapshot.
// Local bwrap, local plain and a remote runner are backends; a container
// or Kubernetes backend would be another. docs/dev/environments.md is the
// design: what each side does, what crosses the wire to a runner and what
// never does, and how failures map to the effect ledger.
//
// Invariants every backend keeps (the conformance suite,
// internal/environment/environmenttest, checks them):
//
//   - File operations are confined to the workspace, and their errors
//     name workspace-relative paths only.
//   - A snapshot id is the digest of the workspace's content: taking one
//     of an unchanged workspace gives the same id and stores nothing; a
//     restore fetches only the blobs its side lacks and converges,
//     removing what the snapshot does not hold.
//   - Stop frees nothing unless the workspace is exactly the snapshot
//     the caller names (ErrChanged) and no other Environment of the
//     workspace is open (ErrBusy).
//   - After Close or Stop every call fails with ErrClosed, and the
//     programs Start started are ended.
//   - Failures say what they mean for the call: ErrUnavailable (nothing
//     ran), ErrLost (the outcome is unknown: a crash of that call).
//
// NewLocal is the backend of this machine: workspaces of an
// internal/workspace Manager, programs run by an internal/sandbox Backend,
// snapshots by internal/snapshot into the given blobs, the egress proxy
// of internal/egress on a Unix socket.
//
// It imports internal/egress, internal/sandbox, internal/snapshot,
// internal/tool, internal/workspace and the standard library. Who may
// import it: internal/engine (which opens the sessions' environments),
// internal/environment/remote (its runner's errors), internal/mcp (a stdio
// server is an Environment's Process), internal/node (which builds the
// backend), internal/runner (a runner's environments are local ones on its
// machine) and tests.
package environment
