// Package remote is the environment backend whose environments live on a
// runner (`longhaul runner`, a self-managed environment): every operation
// of an environment.Environment is a call over the runner's connection,
// held by the node's hub (internal/runner/hub), and the runner answers it
// with the local backend on its own machine (internal/runner, calling
// environment.NewLocal under its data directory).
//
// What it keeps (docs/dev/environments.md, "The wire to a runner" and
// "Failure semantics"):
//
//   - No runner connected: Open, and any call of an environment whose
//     connection ended before the call, fail with
//     environment.ErrUnavailable (nothing ran). A connection that ends
//     while a call is in flight fails it with environment.ErrLost; the
//     runner ends every program of that connection before it dials again,
//     so a call run again after ErrLost never overlaps the lost one.
//   - The runner's error codes map back to the sentinels
//     (workspace.ErrEscapes, workspace.ErrInvalidPath, fs.ErrNotExist,
//     environment.ErrDiskQuota, ErrChanged, ErrBusy, ErrClosed,
//     snapshot.ErrTooLarge); the runner's messages name no path of its
//     machine.
//   - Writes larger than a frame go in parts of one upload; reads larger
//     than a frame are made of several reads.
//   - A restore lets the runner fetch (blob.get) only the blobs of the
//     snapshot it restores (hub.AllowRestore), for the call's duration.
//   - The network allowlist, ports and the control plane's addresses go
//     to the runner (its egress proxy); the proxy's decisions come back
//     (network.event) to OpenParams.Network.OnEvent. No secret of the
//     server crosses: commands, their environment, file contents and
//     blobs only.
//
// It imports internal/environment, internal/runner/hub and
// internal/runner/link, internal/sandbox, internal/snapshot, internal/tool,
// internal/workspace and the standard library. NewRouter is the backend the
// engine opens every session through: this node's (local) unless the
// agent asks for a runner (environment.runner), then a matching connected
// runner, or the one the session is pinned to. Who may import it:
// internal/node (which builds the router) and tests.
package remote
