// Package runner is the runner's side of a self-managed environment
// (`longhaul runner`): a process on another machine that connects
// outbound to the server, over one WebSocket (GET /v1/runners/connect,
// with a runner key), says who it is (link.Hello: name, labels, capacity,
// version) and answers the server's calls with the machine's own sandbox
// backend (sandbox.Detect on the runner's machine), in a workspace per
// session under its data directory.
//
// The runner opens no port: it dials the server, and when the connection
// ends it dials again, after an exponential backoff with jitter (Backoff)
// that starts again from Config.MinBackoff once a connection was
// accepted. It stops for good when the server says it must not come back:
// its key was refused at connect (401, 403), revoked while connected
// (link.StatusKeyRevoked), its Hello was refused (link.StatusBadHello), or
// a newer runner of the same key took its name (link.StatusReplaced). A
// name held by another key (link.StatusNameHeld) or taken over by one
// after this connection went stale (link.StatusTakenOver) is tried again
// with backoff: another key must not be able to stop it for good.
//
// The calls it answers: link.MethodExec, a command run by `sh -c` in the
// session's workspace (DataDir/workspaces/SESSION), its output sent as
// output frames after the run (the sandbox returns it whole), and the
// environment methods (link's env.go: env.open/claim/close/stop, process.*,
// fs.*, snapshot.*, runner.info), answered with the local environment
// backend (environment.NewLocal) on this machine: the same workspaces, its
// sandbox, an egress proxy per environment with the allowlist the server
// sent (its decisions go back as network.event), the limits asked capped
// by Config.Limits. Snapshots are taken and restored here; their blobs go
// to and come from the server (blob.has in batches, blob.put, blob.get)
// through a cache under DataDir/blobs (bounded, by digest, every blob
// checked against its digest), so a restore fetches only what this
// machine lacks; a snapshot's root tree is always sent, the proof the
// server asks that this runner holds it. Every environment of a connection is closed (its
// programs ended) when the connection ends, before the runner dials
// again: a call the server runs again after losing the connection never
// overlaps the lost one. Error messages name no path of this machine. The
// session is the server's choice; the runner only checks that it is a
// safe directory name. Nothing it sends carries a secret: it holds none
// (its key goes only in the upgrade request's Authorization header).
//
// It imports internal/runner/link, internal/environment (the local
// backend), internal/egress (the control plane's addresses),
// internal/sandbox, internal/snapshot, internal/tool (the sandbox's Exec
// types), internal/workspace, the standard library and
// github.com/coder/websocket. Who may import it: cmd/longhaul (the runner
// command) and tests.
package runner
