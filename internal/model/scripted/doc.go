// Package scripted is the deterministic model provider ("provider":
// "scripted") used by tests and by the offline demo: an agent spec carries a
// script, a list of steps, and model call number N of a session plays step N
// (API.md "The scripted model provider").
//
// Invariants:
//
//   - Determinism: a response depends only on the request (script, pricing,
//     messages, position), never on time or on earlier calls, so replaying a
//     journal replays the same session. Tool calls without an id in the script
//     get the id CallID(position, index).
//   - Every position has an answer: an error step returns a classified
//     *model.Error (and still uses up its position, so a retry plays the next
//     step), and a position past the end of the script gets the final text
//     FinishedText, never an error.
//   - Scripts are decoded strictly by Parse. Every refusal is a
//     *model.FieldError whose Field is relative to the model spec and starts
//     with "script" (e.g. "script[2].tool_calls[0].name"); the engine calls
//     Provider.ValidateSpec (Parse and model.ParsePricing) when an agent is
//     defined or a session is created and reports "agent_spec.model." + Field,
//     so a bad script is refused up front rather than mid-session.
//   - Waiting (delay_ms) goes through an injectable After function and always
//     ends when the context is cancelled.
//
// It imports only the standard library, longhaultype and internal/model;
// internal/node wires it by provider name and internal/bench drives the
// engine with it. Who may import it: internal/bench, internal/node and
// tests.
package scripted
