// Package engine runs Longhaul's durable sessions: it implements the API's
// operations (server.Backend), schedules runnable sessions onto a bounded pool
// of workers under leases, and runs the turn loop of DESIGN.md with its
// side-effect ledger.
//
// Invariants:
//   - every state change is an event appended with the projection it causes,
//     in one store transaction (writer.go); nothing lives only in memory;
//   - a worker appends only under its lease (owner, epoch); losing the lease
//     stops it before it writes or runs anything else;
//   - an effect is in the ledger (tool.started, durable) before a tool that is
//     not read-only runs; after a crash, read and idempotent calls run again
//     (with the same idempotency key) and an irreversible one is settled by
//     its tool's reconcile probe (tool.Reconciler, reconcile.go) when it
//     has one that can tell, else becomes an in-doubt required action that
//     only a decision can settle;
//   - a session that waits for a required action holds no goroutine, no
//     worker and no lease: it is a row that a decision makes runnable (or
//     that wakes at an approval's expiry);
//   - before a call runs: the turn's stop conditions (stop.go), the budget
//     (budget.go) and the policies (policy.go) are checked, in that order;
//     in a tree of sub-agents the call also reserves in the tree's ledger
//     in the store, settled with the append that journals it, so the whole
//     tree spends at most its root's limits plus one call (treebudget.go);
//     an approved call runs only if its arguments hash to what a person
//     approved (approval.go, actions.go);
//   - transient failures are retried by the effect class's rules
//     (retry.go): never an irreversible call;
//   - a model key goes only where it is bound (modelaccess.go): a vault
//     secret to its hosts, an api_key_env variable only when the operator
//     allowed it (Config.ModelKeyEnv) and to its hosts, checked when an
//     agent is defined and again before every call; no session reaches the
//     server's control plane (Config.ControlPlane), by the network or as a
//     model's base_url.
//   - the session's wall-clock budget, the turn's timeout and a cancel bind
//     a call in flight: it runs under a context cancelled with the cause at
//     the first deadline or when a cancel is journaled, on whichever node
//     (interrupt.go), which also maps the cause to the journal (a
//     read or idempotent call failed, an irreversible one in doubt) and
//     stops the turn; a parked wait wakes at the deadline (a wake time of
//     its row).
//   - a person's steering message (turn.steered) reaches the model
//     verbatim at the turn's next step call, in journal order, and a turn
//     does not end with one unread; a steer with interrupt abandons a
//     step's model call in flight through the same watcher as a cancel and
//     the call is made again with it; it never cuts a tool call (steer.go).
//   - a person changes the workspace (files.go) only while no worker runs
//     the session, journaled (workspace.changed, the content a blob) before
//     the answer; the workspace is the last snapshot plus the people's
//     changes since, which any node that lacks them restores and applies
//     before the session's next tool call or checkpoint (workspacesync.go);
//     the model is told at its next call (personnote.go).
//   - the trajectory monitor's detectors (internal/monitor) read every
//     event the runner appends or reads in; what they find is journaled
//     (monitor.finding) at the next tick, before anything else runs, and
//     never twice; a detector whose action is ask parks the session on a
//     monitor action, one whose action is stop ends the turn
//     (monitor.go).
//   - the model monitor's review (monitor.reviewed) of a call is durable
//     before the call runs and never made again for it; a review that
//     gives no verdict is a pause (fails closed); what it reads is
//     redacted of every vault value before it is clipped
//     (monitorreview.go).
//   - a pause cuts nothing: it takes effect before the next call starts
//     (the worker reads the session's last seq at every safe point, and
//     the new events when another writer appended; before a step's model
//     call the request's conditional append is that read: when another
//     writer appended, the request is dropped unsent and the worker
//     decides again on the newer journal, runner.go modelCallOnlyDue) or
//     at once when no worker runs the session; a paused session holds no worker,
//     lease or wake time, whatever is decided meanwhile, and its paused
//     time counts toward no deadline (pause.go).
//
// Files: the loop is runner.go (tick), step.go (model calls) and exec.go
// (tool calls), each tool name resolved by the runner's tool catalog
// (catalog.go: the agent's entries, the engine's own tools of
// enginetools.go, the registry, the MCP listings), interrupt.go (calls cut in flight), steer.go (steering
// messages), pause.go (pause and resume), with mcp.go for the tools of MCP
// servers (listed into the
// journal, called through internal/mcp); the API side is sessions.go, actions.go (decisions),
// budget.go (PATCH budget), inbox.go, reads.go and files.go (a person's
// files); tree.go bounds a session tree (MaxTreeSessions) for the API's
// trees (internal/app) and the tree-wide policies, walked by the store's one
// walk of a tree (store.WalkTree, which export shares).
//
// It imports the store interface (never a driver), journal, model, policy,
// tool, mcp, egress, vault (its host bindings), monitor, workspace and
// jsonstrict (a spawn's agent_spec read one way), and no transport
// (internal/server, internal/webui, cmd/); internal/node wires concrete
// drivers and providers into it. Who may import it: the root package,
// cmd/longhaul, internal/app, internal/bench, internal/node and tests.
package engine
