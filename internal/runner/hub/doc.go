// Package hub is the server's side of the runner connections
// (self-managed environments): it takes each connection a runner opened
// (GET /v1/runners/connect, upgraded to a WebSocket by internal/server,
// which authenticated the runner's key), checks the runner's Hello,
// records the connection in the store (so that every node's GET
// /v1/runners lists it), keeps it alive and checked, and holds it for the
// calls the server makes to the runner (link.Conn.Call).
//
// Invariants it keeps:
//
//   - A runner is named within its key's project, and one connection holds
//     a name: a newer connection under the same name and key replaces the
//     older one (closed with link.StatusReplaced), on this node at once and on
//     another at its next touch (the store's row names the connection that
//     holds it). A runner that restarts after a network cut so reconnects
//     at once, without waiting for the server to notice its old
//     connection dead. Another key of the project is refused the name
//     (link.StatusNameHeld) while its holder's row is fresh, and takes it
//     over only once the row went stale (StaleAfter; the older connection
//     is closed with link.StatusTakenOver, on this node at once and on
//     another at its next touch, which finds the row not its own and
//     leaves it so), so one runner key cannot knock its project's other
//     runners offline.
//   - Staleness is judged by the store's clock alone (the row's times are
//     the database's), so nodes whose clocks disagree agree on it.
//   - Every Config.TouchInterval the connection's key is read again
//     (KeyCheck): a revoked or expired key closes the connection with
//     link.StatusKeyRevoked, its row removed first (no list read after
//     the runner stopped shows it). A failure to read it (the database away) is
//     logged and tried again at the next touch; it closes nothing.
//   - The store's row is touched (its liveness) at the same interval, and
//     deleted when the connection ends; a row whose node died stays until
//     it is stale (RunnerList's staleAfter: StaleAfter, by the store's
//     clock).
//   - The runner is the lower-trust party: its Hello is checked field by
//     field (link.Hello.Check), it must come within Config.HelloTimeout,
//     and every later frame is checked by link. It may call only
//     network.event (its environments' proxy decisions, routed to the
//     environment that opened them: Runner.OnNetworkEvent) and blob.has,
//     blob.put, blob.get (blobs.go: has and put only while a snapshot the
//     server asked for is being taken, AllowTake, bounded by its limits,
//     which records the blobs sent as the proof that the runner holds
//     them; a put is checked against its digest and never overwrites; a
//     get answers only blobs reachable from a snapshot the server is
//     asking that runner to restore, AllowRestore), and nothing it says
//     selects a session.
//   - Snapshot blobs belong to projects (Config.Owners, the store's
//     blob_owners): blob.has calls a blob the runner's project does not
//     own missing, stored or not (no oracle of what other projects
//     hold), so the runner sends its bytes; a snapshot id it answers is
//     accepted only if every blob it reaches is its project's or was sent
//     on the connection while takes were in progress (AcceptSnapshot,
//     which reads only the trees the project does not own and asks only
//     about what the copy's last claimed snapshot does not name:
//     snapshot.LastClaim), so that a runner that wraps another project's
//     snapshot or file digest in a tree of its own is refused; the blobs
//     sent become the project's as takes end (a tree only with all it
//     refers to, whichever take sent them); a restore, and every
//     blob.get, require the project's ownership as well as the scope.
//   - A runner whose Hello says an older protocol than Config.MinProtocol
//     (link.Hello.Protocol; none: 1) is refused before anything is recorded
//     (link.StatusOutdated, the reason saying to upgrade it): every runner
//     the hub holds answers the calls of the server's protocol. The row
//     records the protocol it speaks (listed).
//   - A key holds at most Config.MaxConnsPerKey connections to a node, and
//     a node at most Config.MaxConns, counted from the upgrade (before the
//     Hello); one more is closed with link.StatusTooManyConns before
//     anything is recorded.
//
// It imports internal/runner/link, internal/snapshot (a restore's tree
// references, the owners of blobs), internal/store (the runners table),
// the standard library and github.com/coder/websocket. Who may import it:
// internal/environment/remote (its environments' calls),
// internal/node (which builds the Hub and hands it to the server),
// internal/server (for the interface it serves) and tests.
package hub
