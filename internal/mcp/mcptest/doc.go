// Package mcptest is an MCP server for tests, built with the same SDK the
// engine's client uses: tools that answer, fail (isError), refuse (a
// protocol error), and crash mid-call, and that record the idempotency key
// each call carried. It runs in-process (NewServer, for in-memory
// transports) or as a stdio server in a subprocess: a test binary whose
// TestMain calls MaybeServe first serves MCP over its stdin and stdout when
// started with ServeEnv set, so tests can name the test binary itself as an
// agent's MCP server command.
//
// Who may import it: no package of the module (tests aside).
package mcptest
