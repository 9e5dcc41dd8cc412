// Package freespace watches the free space of the volumes that hold a
// node's data (the data directory, the workspaces) against a floor.
//
// Below the floor a node stops taking on work that would need space: the
// engine claims no session and creates none, /readyz answers 503, and
// writes that cannot be made are 507. Every check asks the file system
// (statfs) anew, so a node recovers by itself as soon as space returns; the
// check is cheap (one system call per directory) and runs before each
// claim and each request that creates work.
//
// It imports only the standard library and internal/store (for the
// ErrStorageFull sentinel its errors wrap). Who may import it: cmd/longhaul,
// internal/node, internal/server and tests.
package freespace
