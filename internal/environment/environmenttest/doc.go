// Package environmenttest is the conformance suite for environment
// backends (internal/environment): every backend's tests call Run, so the
// semantics written in that package's comments (confined file operations,
// content-addressed incremental snapshots, restores that fetch only the
// missing blobs, Stop that never frees unsnapshotted work, ErrClosed after
// Close) hold for local bwrap, local plain and a remote runner alike.
//
// Blobs is the server's store of blobs (a real SQLite store) and counts
// what is fetched by digest. Tests wait with deadlines, never by sleeping.
//
// It imports internal/environment, internal/sandbox, internal/snapshot,
// internal/store/sqlite, internal/tool, internal/workspace, the standard
// library and testify's require. Who may
// import it: no package of the module (tests aside).
package environmenttest
