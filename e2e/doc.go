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
//   - TestReadmeServeCommand runs the README's first command as written and
//     stops it with SIGTERM; TestReadmeTestCommandIsWhatCIRuns keeps the
//     README's test command and .ci/run identical, so neither can rot.
//
// The package has no non-test code beyond this comment; nothing imports it.
// Its tests skip nothing: they need only the go command, a POSIX sh, curl,
// bubblewrap and the loopback interface, all of which CI has.
package e2e
