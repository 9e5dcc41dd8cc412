// Package journal is the projection of a session's state from the events of
// its journal. The events' payloads are not defined here: they are the
// public wire contract, one type per event type in longhaultype
// (eventdata.go), so the engine, this projection, the CLI, webhooks and Go
// clients read the same structs.
//
// Apply is a pure function: the state of a session is, by construction, what
// its events say. The engine applies every event it appends (and persists the
// resulting State in the same transaction), and the test suite replays whole
// journals to check that the stored state is exactly their projection.
//
// Invariants kept here:
//   - a session has at most one running turn; later turns queue behind it;
//   - a tool call moves pending -> started -> done (or pending ->
//     awaiting_action -> done) and never back, except an in-doubt effect
//     decided did_not_happen, which returns to pending to run again with the
//     same idempotency key;
//   - open effects (started, in doubt) are kept in State until resolved, so a
//     resumed worker knows exactly which calls may have touched the world;
//   - a turn does not complete while a steering message (turn.steered) has
//     not reached a step's model call (steer.go).
//
// It imports only the standard library and longhaultype (where the events'
// payload types are: every other package reads those, never this one). Who
// may import it: internal/engine, internal/report and tests.
package journal
