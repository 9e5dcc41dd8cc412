// Package anthropic is the model provider for Anthropic's Messages API
// ("provider": "anthropic"), built on the official Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2, which speaks API version
// 2026-10-21).
//
// How a model.Request maps onto a request:
//
//   - System messages (the pinned block, a compaction summary) become the
//     top-level "system" parameter, one text block each, in order and
//     verbatim.
//   - User, assistant and tool messages become alternating user/assistant
//     messages of content blocks. Consecutive items of one role join one
//     message, so the results of parallel tool calls (tool_result blocks with
//     tool_use_id, content and, for a failed call, "is_error": true) travel
//     in one user message, before any words the user added after them. An
//     assistant message is its thinking (below), its text, then one tool_use
//     block per call (id, name, input; empty arguments are {}).
//   - Tools become custom tools whose input_schema is the tool's JSON schema
//     ("type": "object" added when missing).
//   - max_tokens is the spec's max_output_tokens, or DefaultMaxOutputTokens
//     (less for the models whose output limit is lower). Temperature is
//     refused by ValidateSpec: API 2026-10-21 answers 400 to any sampling
//     parameter. Extended thinking is not requested (it needs a token budget,
//     and no spec field asks for one yet), but thinking blocks in responses
//     and in the history are handled.
//   - The key goes in x-api-key (and, as the SDK sends it, in Authorization:
//     Bearer); base_url replaces the API's address when the spec gives one.
//
// How a streamed response maps back: text deltas and thinking deltas go to
// Request.OnDelta as they arrive (Delta.Text, Delta.Reasoning); text blocks
// join into Response.Text; tool_use blocks become ToolCalls with the input
// accumulated from input_json_delta; thinking and redacted_thinking blocks
// become Response.Reasoning (Provider "anthropic", Text, Signature, Redacted).
// Usage follows lt.Usage: InputTokens is input_tokens + cache_read_input_tokens
// + cache_creation_input_tokens, CachedInputTokens is cache_read_input_tokens,
// OutputTokens is output_tokens (message_delta's cumulative count replaces
// message_start's), ReasoningTokens is output_tokens_details.thinking_tokens
// when reported; CostUSD is model.CostOf(spec, usage).
//
// Invariants:
//
//   - Complete responses only. A response is returned after message_stop, from
//     a stream whose events came in the documented order and whose tool inputs
//     are valid JSON. A stream that ends early, breaks off, carries an "error"
//     event (overloaded_error → model.KindOverloaded, otherwise
//     model.KindServer) or is malformed returns a retryable *model.Error and
//     no response, so the engine retries the call as a whole and never
//     journals half an answer.
//   - No SDK retries and nothing from the environment: the engine retries and
//     journals every attempt, and the key and address come only from the
//     request and its spec.
//   - Errors are classified for the retry policy: model.KindForStatus on the
//     HTTP status (529 → overloaded), RetryAfter from retry-after-ms or
//     retry-after (seconds or an HTTP date), a prompt that does not fit →
//     model.KindContextTooLong, deadlines and network timeouts →
//     model.KindTimeout, connection failures and malformed bodies →
//     model.KindServer. A cancelled ctx is returned wrapped instead.
//   - Keys never appear in an error: messages are built from the API's error
//     type and message only, then scrubbed of the key (a proxy may echo it)
//     and cut to one short line.
//   - Thinking goes back: an assistant message whose Reasoning came from
//     "anthropic" is sent with its signed thinking block first, then its
//     redacted_thinking blocks, as the API requires in a tool-use loop.
//     model.Reasoning holds one signature, so a response with several thinking
//     blocks keeps their text readable but cannot send them back.
//
// It imports the SDK, internal/model and longhaultype. The engine uses it
// through model.Provider, wired by provider name in internal/node. Who may
// import it: internal/node and tests.
package anthropic
