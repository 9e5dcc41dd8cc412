// Package inotify is a small non-blocking inotify instance for watching
// directories, shared by the snapshot Cache (which reads only the paths a
// command changed) and the sandbox's workspace usage tracker (which
// re-measures only those paths for the disk quota). Elsewhere than on Linux
// Open fails with errors.ErrUnsupported and callers walk instead.
// Who may import it: internal/sandbox, internal/snapshot and tests.
package inotify
