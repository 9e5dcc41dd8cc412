// Package link is the protocol between the server and a runner (a
// self-managed environment, `longhaul runner`): many calls multiplexed over
// one WebSocket the runner opened, each matched by its id.
//
// # Messages
//
// Every message is one JSON text frame, a Message. After the handshake
// (the runner's Hello, the server's Welcome: ReadJSON and WriteJSON, before
// New) either side may call the other:
//
//	call    {id, method, params}   the caller opens call id
//	cancel  {id}                   the caller gives up on call id
//	output  {id, stream, data}     the callee streams a chunk of call id
//	                               ("stdout" or "stderr"), in order
//	result  {id, result}           the callee's answer: call id is over
//	error   {id, error}            the callee's failure: call id is over
//
// Ids are the caller's own: each side numbers its calls 1, 2, 3… and a
// message's type says whose id it names (call and cancel: the sender's;
// output, result and error: the receiver's), so the two sequences never
// collide. The server calls the runner's environment methods (env.go,
// exec.go); the runner calls the server's network.event and blob.* (a
// runner sending and fetching snapshot blobs by content address). A side
// sends its calls in the order of their ids.
//
// # Versions
//
// The Hello says which version of this protocol the runner speaks
// (Hello.Protocol, ProtocolVersion of its build). A version adds methods or
// fields; a runner answers the calls of every version up to its own. The
// server calls the methods of its own version of every runner, so it
// refuses one below MinProtocolVersion at the handshake (StatusOutdated)
// rather than have it fail a newer call mid-session.
//
// # What a side refuses
//
// The runner is a lower-trust party than the server, so every message is
// checked, and a peer that breaks the protocol loses the connection (closed
// with StatusPolicyViolation and the reason): a frame that is not a JSON
// Message with only its type's fields, an unknown type, a call whose id is
// not above every id it used before, a cancel of an id it never used, an
// output, result or error for an id this side is not waiting on (never
// asked, or already answered), an output stream other than stdout and
// stderr, a method name over MaxMethodBytes. A frame over
// Config.MaxMessageBytes closes the connection too (StatusMessageTooBig,
// the WebSocket library's read limit), and this side never sends one
// (Request.Output splits data into chunks that fit). A call to a side with
// no handlers at all is a violation too. A call of a method without a
// handler is answered with an error ("unknown_method"), and one past
// Config.MaxIncoming calls open at once with "busy": those are the
// caller's mistakes, not violations, unless more than MaxRefusalsInFlight
// such refusals wait to be sent at once (a peer flooding calls while not
// reading), which closes the connection, so that the goroutines a peer
// can make this side start stay bounded.
//
// # Cancellation
//
// When a caller's context ends, Call sends cancel and returns the
// context's error at once (or, with CallOptions.AwaitCancelled, once the
// callee answered: its handler is over, or, if it has not within
// HeartbeatTimeout plus Config.CancelGrace, once the connection was closed
// as a policy violation); the callee's handler context is cancelled, and
// its late answer is still awaited (and dropped) so that the id stays
// known until then. A closed connection ends every call on both sides: a
// pending Call returns ErrClosed (wrapping the cause), and every handler's
// context is cancelled.
//
// # Heartbeats
//
// Each side pings the other (a WebSocket ping) every
// Config.HeartbeatInterval and closes the connection if the pong does not
// come within Config.HeartbeatTimeout: a runner that died without closing
// its socket (a cut network, a frozen machine) is noticed within
// interval+timeout, not when TCP gives up.
//
// It imports the standard library and github.com/coder/websocket. Who may
// import it: cmd/longhaul (the runner command's Hello),
// internal/environment/remote (the environment calls' params),
// internal/runner (the runner's side), internal/runner/hub (the server's
// side) and tests.
package link
