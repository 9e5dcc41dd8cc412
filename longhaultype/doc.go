// Package longhaultype holds the wire types of Longhaul's HTTP API: sessions,
// turns, events, required actions, effects, agents and errors, exactly as they
// appear in JSON (see docs/api.md), and the canonical form of a JSON
// document (CanonicalJSON, SameAgentSpec) by which the server and the client
// compare them.
//
// Events carry typed payloads. An Event's Data is the JSON of one Go type per
// event type (eventdata.go): the payload of EventX is XData, and
// workspace.changed carries a WorkspaceChange. The same structs are the
// journal's own contract: the engine writes them and the projection of a
// session's state reads them, so a field the engine alone acts on is there
// too (documented as engine bookkeeping). EventTypes lists every type the
// journal may hold, NewEventData returns a zero payload of a type, and
// Event.DecodeData decodes an event's, for a type switch:
//
//	d, err := ev.DecodeData()
//	switch d := d.(type) {
//	case *lt.ToolFailedData:
//		// d.Error, d.Refused, …
//	case *lt.BlobData:
//		// over 64 KiB: the payload is the blob d.Blob.SHA256
//	}
//
// It is shared by the server, the Go client and the CLI, and imports nothing but
// the standard library, so a client program pulls in no server code. Who may
// import it: any package.
package longhaultype
