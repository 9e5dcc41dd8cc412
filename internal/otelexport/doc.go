// Package otelexport exports each turn of each session as one OpenTelemetry
// trace over OTLP (HTTP with protobuf or JSON, or gRPC), through the
// official OpenTelemetry Go SDK and exporters.
//
// What it sends: when a turn ends (turn.completed, turn.failed,
// turn.cancelled), the turn's spans as GET /v1/sessions/{id}/trace derives
// them from the journal (package trace), with the journal's own start and
// end times, named and attributed after the OpenTelemetry GenAI semantic
// conventions: the turn is "invoke_agent {agent}", a model call
// "chat {model}", a tool call "execute_tool {tool}", a sub-agent
// "invoke_agent {child agent}"; steps, approvals, waits and retried
// attempts keep their Longhaul names. Every span also carries longhaul.*
// attributes (session, turn, step, cost, effect class).
//
// Invariants:
//   - Ids are derived, not random: a turn's trace id is a hash of its
//     session and turn ids (TraceID), each span id a hash of the trace id
//     and the span's id in the Longhaul trace. A turn exported twice
//     arrives with the same ids, so a backend can recognise the repeat.
//   - A turn is exported by the node that ended it: the one whose worker
//     id is on the ending event, or, for a turn ended through the API
//     (a person stopping it), the node that wrote the turn's last worker
//     event. Nodes sharing one database thus do not export a turn twice.
//   - Export is best effort, at least once: the exporter follows the
//     journal through the store's notifications with an in-memory cursor
//     per session, so a crash (or a full outbox at the collector) between
//     a turn's end and its export loses that export; GET
//     /v1/sessions/{id}/trace still has the turn. After a start, only
//     turns that end from then on are exported.
//   - Memory is bounded: cursors of sessions idle for Config.IdleAfter are
//     forgotten (at most Config.MaxSessions are kept); a session seen
//     again is re-read from its start, exporting only turns that ended
//     after the cursors last forgotten.
//
// The official exporters read the standard OTEL_EXPORTER_OTLP_* variables
// (endpoint, headers, timeout, TLS, compression) themselves; cmd/longhaul
// decides whether export is on at all and internal/node starts it. It
// imports the store's notification types and the wire types, never the
// engine. Who may import it: cmd/longhaul, internal/node and tests.
package otelexport
