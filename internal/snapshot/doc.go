// Package snapshot takes and restores content-addressed, deduplicated
// snapshots of a workspace directory, so that a session's checkpoints can
// each hold the workspace as it was, a lost workspace can be recreated, and
// a fork can start from a checkpoint's files.
//
// # Format
//
// A snapshot is a tree of blobs in a Blobs store (store.Store), in the
// manner of git:
//
//   - A file's content is cut into chunks by content-defined chunking (a
//     rolling Rabin fingerprint; 512 KiB to 4 MiB, 1 MiB on average), each
//     stored as the blob named by its SHA-256. A file up to 512 KiB is one
//     chunk, the blob of the whole file. Because cuts depend on the bytes
//     around them, an edit or an insertion in a large file changes only the
//     chunks near it.
//   - A directory is a tree blob: canonical JSON {"v":1,"entries":[...]}
//     listing its entries sorted by name, each with its type ("dir",
//     "file", "symlink"), permission bits, and for a file its size, the
//     SHA-256 of its whole content and its chunks (omitted when the file is
//     one chunk), for a directory the digest of its tree, for a symlink its
//     target as stored in the link. Names and targets that are not UTF-8
//     are stored base64-encoded. The root tree also lists the excluded
//     prefixes.
//   - The snapshot id is the digest of the root tree.
//
// Load flattens a snapshot into a Manifest (every path with its type, mode,
// size and digests) for display and comparison; Lookup, ListDir and
// CopyFile (browse.go) read one directory or one file of it without
// restoring it, never following a symlink (the API's read-only view of a
// checkpoint).
//
// # Deduplication
//
// Identical bytes are one blob: a file unchanged since the last checkpoint,
// a file copied to another place or another session's workspace, and a
// directory none of whose entries changed (its tree blob is then byte for
// byte the same) cost nothing more. A checkpoint after a small edit stores
// the changed chunk and the trees on the path from the file to the root.
// Take asks the store (BlobHas) before sending a blob, and a walk sends
// the blobs that queued up meanwhile in one transaction to a store that
// can (BatchBlobs). A Cache also lets it skip re-reading files whose
// inode, size and times are unchanged and re-asking about blobs it knows
// are stored.
//
// # Incremental snapshots
//
// With Options.Incremental, a Take also leaves in the Cache a record of
// every directory's tree, and the next Take of the workspace starts from
// it: told the paths written since (Cache.NoteWrites), it reads those and
// re-encodes the directories on the way to them only, so a checkpoint
// after a write_file costs the same in an empty workspace and in one of a
// hundred thousand files. A writer of unknown paths
// (Cache.BeginUnknownWrites), a restore (Cache.Forget), anything unusual on
// a written path (a symlink, a hard link, a special file), other options,
// or a Take overlapping another, make the next Take walk the workspace as
// before; the record is in memory only, so after a restart or on another
// node the first Take walks (incremental.go).
//
// With CacheConfig.Watch (Linux), a walk also puts an inotify watch on
// every directory before listing it, and the kernel's events name the
// paths changed since: a Take after a writer of unknown paths is then
// incremental too, its cost that of what the writer changed. An overflow
// of the kernel's queue, a moved directory, a replaced workspace
// directory, a file with other names, or watches running out make the
// next Take walk (watch.go). With CacheConfig.WatchEmptyRoots instead, only
// an empty workspace directory is watched, until it holds something: the
// Take after a writer that wrote nothing in it costs an lstat. A Take with
// nothing written since its record opens nothing.
//
// # Owners
//
// Blobs are shared by content, so knowing a digest must not give a project
// another project's files. Claim (claim.go) records that a project owns
// every blob a snapshot reaches (Owners: the store's blob_owners), reading
// only the trees the project does not own yet: a tree is recorded after
// every blob it reaches, so an owned tree stands for them and a snapshot
// after a small change costs the trees on the way to it. ClaimOptions.May
// says which blobs the project may claim (a runner's snapshot: those it
// sent the bytes of during the take); one it may not fails with
// ErrNotOwned and records nothing. CheckOwned is what a restore asks
// first: the project owns the root, and what lies below it is recorded.
// ClaimOptions.base spares the questions about what a snapshot shares with
// one a claim of this process read, save below the trees it took on trust
// (owned as trees already: one may be a root the owners migration recorded
// alone, with no rows below it): a copy's LastClaim (lastclaim.go)
// claims each of its snapshots against its last, so that a step that wrote
// one file asks about the file and the trees on the way to it, on the
// server's machine (May nil) and on a runner (May: what it sent) alike.
//
// # Safety
//
//   - Take and Restore reach the workspace only through an os.Root, so no
//     path, however the workspace changes meanwhile, leads outside it.
//   - Take records symlinks and never follows them; it skips devices,
//     FIFOs and sockets (opened, if one replaces a file, without blocking).
//   - Restore refuses a tree whose names are not single path components
//     ("..", "a/b", "/etc", "", NUL), unsorted or duplicated, of unknown
//     type, or nested deeper than 1024 levels; it checks every blob against
//     its digest; it creates symlinks as stored without ever following one,
//     writes files to a temporary name and renames them into place, and
//     removes what the snapshot does not hold, so restoring into a dirty
//     directory converges.
//   - Only permission bits are recorded and restored: never setuid,
//     setgid or sticky bits, owners or times.
//   - Error messages name workspace-relative paths only, never the host
//     path of the workspace.
//
// The package imports the standard library and the chunking library only.
// The engine uses it for checkpoints (Take), for recreating a lost
// workspace (Restore) and for forking a session from a checkpoint (Restore
// into the new session's workspace); export reads checkpoints' trees. Who
// may import it: internal/engine, internal/environment,
// internal/environment/remote, internal/export, internal/node (which makes
// the engine's Cache), internal/runner (its blob cache), internal/runner/hub
// (a restore's scope: TreeRefs) and tests.
package snapshot
