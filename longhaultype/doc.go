// Package longhaultype holds the wire types of Longhaul's HTTP API: sessions,
// turns, events, required actions, effects, agents and errors, exactly as they
// appear in JSON (see docs/api.md), and the canonical form of a JSON
// document (CanonicalJSON, SameAgentSpec) by which the server and the client
// compare them.
//
// It is shared by the server, the Go client and the CLI, and imports nothing but
// the standard library, so a client program pulls in no server code.
package longhaultype
