// Command peers runs, on DBOS Transact Go or River, a workload equivalent
// to `longhaul bench`'s agent step, fully durable, and prints a table in
// the shape of `longhaul bench`'s, so that ./compare can read both.
//
// The workload is internal/bench's: a session of --steps agent steps, each
// a model call then a tool call (the no-op read tool), except the last,
// whose model call answers with text; each call's result is journaled
// before the next call starts. It runs --rounds sessions one after another
// (the serial run), then --concurrent sessions at once, twice (the
// concurrent run), as `longhaul bench` does.
//
//   - DBOS: a workflow per session, a step per call (so one agent step is
//     two DBOS steps), started with RunWorkflow and awaited with GetResult.
//   - River: a job per session, a resumable step per call, each step
//     checkpointed with its output in a transaction of its own
//     (ResumableSetStepCursorTx); the last one also completes the job
//     (JobCompleteTx). River has no memoised workflow steps: this is its
//     closest equivalent.
//
// Durability is as Longhaul's. On SQLite (modernc.org/sqlite, the driver
// Longhaul uses) both get a handle opened in WAL mode with
// synchronous=FULL on every connection, checked before the run: DBOS would
// open its own with synchronous=NORMAL, which may lose the last commits on
// power loss, so it is given this one through Config.SQLiteSystemDB; its
// commits sync with fdatasync, as Longhaul's store switches the library
// to. On
// PostgreSQL each run has a temporary schema of --url, dropped afterwards;
// the server's fsync and synchronous_commit are printed with the table.
//
// Invariants it keeps:
//
//   - It is a module of its own, so DBOS and River never enter the main
//     module's go.mod; it imports nothing of the main module.
//   - Every run starts from an empty database (a new file or a new schema).
//
// Who may import it: nobody; it is a command.
package main
