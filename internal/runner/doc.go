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
// The calls it answers today: link.MethodExec, a command run by `sh -c`
// in the session's workspace (DataDir/workspaces/SESSION), its output
// sent as output frames after the run (the sandbox returns it whole). The
// session is the server's choice; the runner only checks that it is a
// safe directory name. Nothing it sends carries a secret: it holds none
// (its key goes only in the upgrade request's Authorization header).
//
// It imports internal/runner/link, internal/sandbox, internal/tool (the
// sandbox's Exec types), the standard library and
// github.com/coder/websocket. Who may import it: cmd/longhaul (the runner
// command) and tests.
package runner
