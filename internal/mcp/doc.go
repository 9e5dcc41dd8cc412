// Package mcp connects a session's agent to the MCP servers its tools
// entries of type "mcp" name, through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): it starts or reaches the
// servers, lists their tools, decides what of them the model is offered and
// with which effect class, and calls them.
//
// A Manager holds one client connection per server for one session runner
// (the engine creates it when the runner claims the session and closes it
// when the runner parks or ends, so a waiting session holds no server
// process). It connects lazily; a server that died is started again on its
// next use, after a backoff that doubles with each failure in a row, and
// after Config.MaxFailures failures in a row it is unavailable to that
// runner. A listing or call that gets an answer resets the count.
//
// Dialers say how a server is reached:
//   - Stdio starts the server's command (CommandLine quotes a program and
//     its arguments) through the sandbox's Start facility, in the session's
//     sandbox and workspace, and speaks MCP over its standard input and
//     output; closing the connection closes its stdin, and kills its
//     process group if it has not exited after a grace period.
//   - HTTP speaks streamable HTTP to a URL, with every TCP connection
//     opened by the session's egress policy (the network allowlist
//     applies, and each decision is reported for the journal), and the
//     credentials of the entry's vault secret added to requests to the
//     hosts the secret is bound to, from outside the sandbox.
//
// How a call ends decides what the engine may do next (DESIGN.md principle
// 3); Manager.Call never returns a Go error but a CallResult:
//   - a result with isError is the tool's failure: the model reads it;
//   - a JSON-RPC error the server answered with (a protocol error) means
//     the call did not run: a failure the model reads, not retried;
//   - a server that could not be started means nothing was sent:
//     Transient, so a read or idempotent call is retried by the retry
//     policy, and an irreversible one fails without having run;
//   - a connection that broke (the server died) or a call that timed out
//     after the request was sent is Unknown: whether the tool took effect
//     is not known. The engine re-runs read and idempotent calls (the
//     idempotency key goes in the request's _meta as IdempotencyKeyMeta,
//     the same on every attempt) and puts irreversible ones in doubt.
//
// Offer turns a listing into what the agent offers: tools in the entry's
// allowlist whose "<server>__<tool>" names models accept and whose input
// schemas compile, each with its effect class (Effect): the entry's
// effects for it, else, with trust_annotations, read for readOnlyHint and
// idempotent for idempotentHint, else irreversible. The result is the data
// of the journal's mcp.tools_listed event, with a hash that tells a
// changed listing from the same one.
//
// It imports the MCP SDK, internal/sandbox (stdio servers), internal/tool
// (credentials, schema checks, canonical JSON) and longhaultype (the
// listing's payload among the wire types). Who may import it:
// internal/engine and tests.
package mcp
