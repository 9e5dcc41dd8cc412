// Package app is Longhaul's application service: every use case the API
// offers — sessions and their trees, turns and controls, required
// actions, following a journal, provenance, workspace files, agents,
// secrets, webhooks, the connected runners and reports — implemented
// once, behind one exported interface, Service. (A runner's connection
// itself is no use case: it is a WebSocket the HTTP API hands to
// internal/runner/hub.)
//
// Both transports are thin adapters over it: the HTTP API
// (internal/server, whose Backend is Service) only decodes a request,
// calls one method and encodes the answer; the Go library (the root
// package's Runtime) calls the same method and turns its error into the
// client's error type. So the two cannot drift, and a rule that must hold
// for every caller (who may do what, the actor recorded on a decision)
// has one place to live.
//
// The sub-agent trees and the followed journals (GetSessionTree,
// ListTreeActions, StreamEvents, StreamTreeEvents) are Trees, which reads
// through Journals (the engine, or a test's in-memory tree) and walks a
// tree with the one walk of a tree (store.WalkTree).
//
// Who calls is a Caller in the context (caller.go), which every transport
// sets: the HTTP API from the API key (Authenticate resolves a stored
// key, authn.go), the library as an admin. Every App method first checks
// the caller's role against the one table of who may do what,
// Permissions (permissions.go); a call without a caller is refused. The
// API keys themselves are a use case too (keys.go).
//
// Errors a caller caused are *apierror.Error values (a 400 naming the
// field, a 404, a 409); anything else is an internal failure.
//
// Who may import it: the root package, internal/node (which builds the
// App), internal/server (for the interface), and tests
// (internal/app/apptest builds an App for them).
// It imports the engine, the vault, the webhook dispatcher, the reports
// and the store interface (for the keys), never a transport.
package app
