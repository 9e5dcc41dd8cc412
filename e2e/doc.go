// Package e2e holds Longhaul's end-to-end tests: they build the real
// longhaul binary once (TestMain), run it as a subprocess on a loopback port
// with a data directory of the test's own, and talk to it only through the
// public Go client and raw HTTP, as an application would.
//
// What they check is what a person relies on when a server dies at a bad
// moment (DESIGN.md principles 1 and 3, API.md "Events"):
//
//   - TestCrashRecovery SIGKILLs the server at many points while scripted
//     sessions run read, idempotent and irreversible tools, restarts it on
//     the same data directory, decides every in-doubt effect from evidence
//     kept outside the server, and then requires that every session
//     finished, that every journal is gap-free, that no irreversible command
//     ran twice, and that every run of an idempotent command saw the key the
//     journal recorded.
//   - TestEventStreamResume reads the server-sent event stream raw (and
//     through client.StreamEvents), disconnects, resumes with Last-Event-ID,
//     restarts the server in the middle of the session, and requires that
//     what was collected is exactly the journal.
//   - TestSubagentsSurviveKills SIGKILLs the server while parents spawn
//     sub-agents that work in parallel in their workspaces, and requires
//     that each parent has exactly its children (none duplicated, lost or
//     orphaned), that each child reported once and its usage rolled up, and
//     that a tree event stream followed through every restart saw every
//     event of every session of the tree exactly once, in order.
//   - TestWebhookDeliveriesSurviveKill SIGKILLs the server with webhook
//     deliveries in flight and queued, and requires that each is delivered
//     after the restart with its original webhook-id, exactly once with a
//     2xx, signed so that the Standard Webhooks reference library verifies
//     it.
//   - TestWebUIApproveEditAndReview, TestWebUISignInWithAPIKey and
//     TestWebUIModules drive the web UI in headless Chromium (chromedp):
//     approvals appear in the inbox, edited arguments are checked and the
//     session goes on with them (the journal, the ledger and the artifact
//     say so), the timeline follows the session live without a reload,
//     accepting the artifact changes the report, a server with API keys
//     asks for one; screenshots of every page go to $LONGHAUL_SCREENSHOTS.
//   - TestMultiNodeKills runs three nodes on one PostgreSQL schema with 200
//     sessions mixing the crash test's tools with approvals (decided
//     through any node) and durable waits (sleeps, and signals sent to a
//     random node), SIGKILLs a node every second or two, in turn, and
//     restarts it (some stay down past the lease TTL, so the others take
//     their sessions over). It requires what TestCrashRecovery requires,
//     and that no step's model call was answered twice, that every read saw
//     the session's latest workspace on whichever node it ran, and that SSE
//     clients following sessions through the kills collected exactly the
//     journals.
//   - TestMultiNodeZombie SIGSTOPs a node in the middle of its sessions'
//     slow steps, lets two other nodes take them over past the lease TTL
//     and finish them, then SIGCONTs it: it must log the loss of every
//     lease, no write of it may be accepted (the epoch fence), and nothing
//     may run twice.
//   - TestMultiNodeSSEFailover follows sessions' streams on one node while
//     other nodes run them, kills that node, and resumes each stream on
//     another with Last-Event-ID: no gap, no duplicate, and the events other
//     nodes write arrive at once (LISTEN/NOTIFY, not the ping's re-read).
//   - TestMultiNodePostgresRestart stops a PostgreSQL cluster of its own
//     under two nodes while sessions run: /readyz reports not ready, naming
//     the storage error, while it is down; once it is back the nodes are
//     ready again, their listeners reconnect (a stream on one node gets
//     the other's events at once), and every session finishes as the
//     workload requires.
//   - TestMultiNodeWorkspaceFollowsSession moves a session from node A to
//     node B and back at its waits: what it reads on A must be what it
//     wrote on B (a node's copy of a workspace is a cache, never used
//     stale).
//   - TestReadmeServeCommand runs the README's first command as written and
//     stops it with SIGTERM; TestReadmeTestCommandIsWhatCIRuns keeps the
//     README's test command and .ci/run identical, so neither can rot.
//   - TestCancelCrash_* SIGKILL the server between a cancel's request and
//     its effect (on one SQLite node right after the answer, racing the
//     effect, read back from the journal; on a node of two sharing
//     PostgreSQL, stopped with SIGSTOP before the other node takes the
//     cancel, so certainly) and restart it on the same data directory: the
//     session is cancelled and nothing starts after the request; an
//     irreversible command the kill cut is an in_doubt action first, and the
//     cancel stays requested until a person decides. TestSteerCrash_* do
//     the same to a steer with interrupt: the step's call made after the
//     restart carries the message, and nothing answers the turn without it.
//   - TestIdempotentCreateSurvivesACrashBeforeItsRecord SIGKILLs the server
//     (stepped as the cancel's crash is) once it has committed the session
//     of a POST /v1/sessions with an Idempotency-Key and not yet recorded
//     the answer, and restarts it: the client's retry is answered at once
//     with that session (not a replay: it ran again and found it), the
//     sessions list holds no other, and a third POST replays it.
//
// The adversarial suite (issue 14, "nothing widens its own powers") is
// adversarial_<area>_test.go, one file per area — budget (a tree of
// sub-agents spends at most its root's limits plus one step), creds (model
// keys, vault secrets bound to their hosts, the server's own API and
// database out of an agent's reach), disk (a full data volume, the vault
// key, the data directory's permissions, crafted imports), http (cross-site
// requests, DNS rebinding, crafted bodies, slow and flooding clients),
// runners (a hostile runner or a stolen runner key against the runner
// route's controls), sandbox (bubblewrap against a root-seeking command),
// spawn (a sub-agent
// never gets more than its parent) and wall (the wall-clock limits kill a
// call in flight) — with tests named TestAdversarial<Area>_<Case>. Each
// case is one scripted attacker: a model driven by the scripted provider
// that obeys the instructions it is fed, or a hostile API client. Each
// asserts from outside the server: a loopback recorder that must receive
// nothing (or exactly what was allowed), the host's state (processes,
// files, /proc) and the journal. adversary_test.go holds what they share
// (the recorder, the script, call and curl builders, the waits) and says
// how to add a case. CI runs the suite as root with bubblewrap, the case
// that matters: a root server's sandboxes must still hold nothing of root.
//
// workload_test.go holds what the crash and multi-node tests share: the
// plans, the operator that decides from evidence kept outside the servers,
// and the checks of journals, ledgers and that evidence. cluster_test.go
// holds the nodes on PostgreSQL and the throwaway PostgreSQL cluster.
//
// The package has no non-test code beyond this comment. Who may import it:
// no package of the module (tests aside).
// Its tests skip nothing: they need only the go command, a POSIX sh, curl,
// bubblewrap, Chromium, PostgreSQL and the loopback interface, all of which
// CI has.
// Outside CI (CI=true), the browser tests skip when no chromium is on PATH.
// The multi-node tests need PostgreSQL: a test database named by
// LONGHAUL_TEST_POSTGRES (or LONGHAUL_TEST_POSTGRES_URL), in which each test
// makes a schema of its own, and, for the outage test, the server binaries
// (initdb, pg_ctl), which it runs as the postgres user when run as root.
// Without them they skip, except under CI=true, where they fail (.ci/run
// starts a throwaway cluster and sets the variable).
package e2e
