// Package workspace manages per-session workspace directories and gives the
// built-in tools confined access to the files inside them.
//
// A Manager owns a root directory and creates one directory per session under
// it (root/<session id>, mode 0700). Session ids are validated to
// [A-Za-z0-9_-] before they become path components, so no id can name a
// directory outside the root.
//
// A Dir is an open workspace. Every file operation it offers goes through an
// os.Root opened on the workspace directory, so a relative path that climbs
// out with "..", an absolute path, or a symlink (of the file itself or of any
// parent directory) that points outside is refused by the kernel-backed
// resolution of os.Root rather than by string checks alone: there is no
// window between checking a path and using it. Such refusals are errors that
// match ErrEscapes and read `path "../x" leaves the workspace`. Symlinks that
// stay inside the workspace are followed normally.
//
// Writes are atomic: a temporary file in the destination's directory is
// written, fsynced and renamed over the destination, and the directory is
// fsynced, so a crash leaves either the old content or the new one, never a
// torn file. A caller that keeps a record of the workspace's files (the
// snapshot cache) hears of these temporary files through OnTempFiles.
// Messages of the errors returned by Dir methods name only the
// workspace-relative path, never a path of the host, so tools may pass them to
// the model verbatim.
//
// A person's changes through the API go through ResolveDirect and Remove
// (direct.go), which follow no symlink at all: a path through one, even
// one that stays inside, is refused, so the change lands exactly where the
// journal says on whichever node it is applied again.
//
// The package imports only the standard library. Who may import it:
// internal/engine, internal/environment, internal/environment/remote,
// internal/node (which makes the engine's Manager), internal/runner,
// internal/tool and tests.
package workspace
