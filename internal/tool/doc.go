// Package tool defines the interface every tool implements (a name, a JSON
// schema for its arguments, a default effect class, and Run) and the
// built-in workspace tools of API.md: shell, read_file, write_file,
// edit_file and list_files (Builtins). The engine adds finish, function tools
// and the others itself. A tool may also implement Reconciler: the engine
// then asks it whether an irreversible call whose outcome a crash left
// unknown took effect, before asking a person.
//
// It also owns the two encodings the engine binds decisions to: argument
// validation against a tool's JSON schema (ValidateArguments, CompileSchema),
// whose errors name the offending field, and canonical JSON
// (CanonicalJSON, ArgumentsSHA256), the form whose SHA-256 an approval and an
// effect ledger row are bound to.
//
// Invariants kept by the built-ins:
//   - Every tool validates its arguments before doing anything; a problem is
//     a Result.Error naming the field ("arguments.timeout_seconds: must be
//     <= 600"), never a panic.
//   - File tools never touch anything outside the session's workspace: every
//     path goes through internal/workspace, which resolves it with os.Root, so
//     "..", absolute paths and symlinks that lead out are tool errors.
//   - write_file and edit_file are idempotent: the engine re-runs them after a
//     crash with the same arguments, and a re-run leaves the same file and
//     returns the same output.
//   - shell runs its command in a process group of its own, with a scrubbed
//     environment; the group is killed when the command ends, times out or
//     is cancelled, and on Linux the kernel kills the command if the server
//     dies, so no orphan keeps writing after the call is over. A plain
//     command (no Exec) runs under the Reaper internal/sandbox registers
//     (SetReaper), which also kills what left the group (setsid) and what
//     outlives a server killed with SIGKILL. Captured output is bounded
//     whatever the command prints.
//   - sqlite_query opens a workspace database read-only, always, through a
//     SQLite VFS confined to the workspace by os.Root; writes, ATTACH and
//     pragma settings are refused, and rows, bytes and time are bounded.
//
// It imports longhaultype, internal/workspace, internal/egress,
// internal/httpretry, the JSON Schema library and the SQLite driver
// (modernc.org/sqlite, never internal/store/sqlite). Who may import it: the
// root package, internal/bench, internal/browser, internal/engine, internal/environment,
// internal/environment/remote, internal/mcp,
// internal/node, internal/runner, internal/sandbox, internal/vault and
// tests.
package tool
