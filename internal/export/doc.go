// Package export moves sessions between stores: Export writes a session (and,
// if asked, its sub-agents) from one store.Store to a file, Import reads
// such a file into another store.Store, SQLite or PostgreSQL alike. It works
// through the store interface only, so any pair of drivers works.
//
// # Format
//
// An export file is JSON Lines, versioned (Format, Version). Each line is
// one object whose "kind" says what it holds, in this order:
//
//   - "header": the format and its version, when it was written, the
//     exported session's id and the ids of every session in the file (the
//     session first, then its sub-agents, parents before children).
//   - For each session: one "session" line (the stored row: agent, parent,
//     status, the pinned spec, the engine's projection (state), last seq,
//     wake condition, times, and the webhook state when the session has a
//     webhook_url), then one "event" line per journal event, seq 1 to the
//     last in order, then one "doc" line per projection row (turns,
//     actions, effects, artifacts, checkpoints).
//   - One "blob" line per content-addressed blob the sessions reference,
//     in digest order: payloads the engine moved out of large events,
//     artifacts' contents, and every tree and chunk of every workspace
//     snapshot a checkpoint (or a workspace restore) names. Each carries its
//     SHA-256, its size and its bytes (base64).
//   - "end": how many sessions, events, docs and blobs came before, so a
//     truncated file is told from a complete one.
//
// JSON documents (events' data, docs, spec, state) are copied byte for
// byte: embedded verbatim when they fit on one line, else (a document with
// a line break in its whitespace, or not UTF-8) as base64 in a field named
// with a "_base64" suffix. Events keep their stored form, so an event whose
// payload was moved to a blob stays a stub and the blob travels with it.
//
// # Invariants
//
//   - Export reads a consistent session: the row is read before and after
//     its events and docs, and a session that changed meanwhile is read
//     again (export is meant for sessions no node is running).
//   - Import checks everything before it writes anything: the format and
//     version, every line, each journal's seqs (1, 2, 3... up to the
//     session's last seq), every blob's SHA-256 and size, that every blob a
//     session references is in the file (snapshots walked tree by tree),
//     the end record's counts, that none of the sessions (nor their
//     artifacts and actions, whose ids are global) exists in the target,
//     and that a sub-agent's parent, in the file or the target, is of its
//     project (spawn_agent keeps it; a tree across projects would report a
//     project's answers into another's journal).
//     A damaged file is refused with an error matching ErrInvalid; an
//     existing session with one matching store.ErrConflict.
//   - Then it writes the blobs (content-addressed: an existing one is
//     skipped) and each session with all its events and docs in one
//     store.SessionCreate, parents first, so a session is imported whole or
//     not at all. Leases are not carried: an imported session is unleased
//     and, if it was runnable, claimable at once.
//   - Webhooks: an imported session keeps its webhook_url's signing
//     secret (the application holds that one) and its notification cursor
//     is set where the source's was (for a session without webhook_url, at
//     its last event), so the target's nodes neither sign with a new secret
//     nor notify the session's history again. Import while no node serves
//     the target store, or one may reach the session first (Import then
//     warns).
//   - Only the named sessions move: agent definitions, vault secrets,
//     idempotency keys, webhook endpoints and pending webhook deliveries
//     stay where they are. Workspaces are not in the file; a node that runs
//     an imported session restores its workspace from the last snapshot.
//
// It imports the store interface (and its walk of a session tree,
// store.WalkTree), the snapshot format, the webhook package (for a signing
// secret) and the wire types (the events' payloads among them);
// the export and import commands run it. Who may import it: cmd/longhaul
// and tests.
package export
