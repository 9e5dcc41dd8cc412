// Package openai is the model provider for OpenAI's APIs and for any server
// that speaks OpenAI's Chat Completions, built on the official Go SDK
// (github.com/openai/openai-go/v3). One package serves two provider names:
//
//   - "openai": the Responses API (POST /responses) by default, or Chat
//     Completions when the spec's api is "chat"; base_url defaults to
//     OpenAI's.
//   - "openai-compatible": Chat Completions at the spec's base_url (Ollama,
//     vLLM, llama.cpp server, LiteLLM...); the key is optional.
//
// How a model.Request maps onto a Responses API request:
//
//   - The leading system messages (the pinned block, a compaction summary)
//     become "instructions", verbatim, joined by blank lines; a system
//     message later in the conversation stays in place as a system message.
//   - User messages are user messages. An assistant message becomes, in
//     order, its reasoning item (below), its text as an assistant message,
//     and one function_call item per tool call (call_id is the call's id).
//     A tool result is a function_call_output with the call's id; a failed
//     one (IsError) is its text after ToolErrorMarker, since the API has no
//     error flag.
//   - Tools become function tools with the tool's JSON schema, not strict
//     (strict mode constrains the schema itself). The API calls tools in
//     parallel by default: several function_call items in one response
//     become several ToolCalls, and their results go back together.
//   - temperature and max_output_tokens come from the spec when set.
//   - The call is stateless: the whole context goes in every request, as the
//     journal is the memory, so "store" is false (nothing is kept at OpenAI)
//     and "include": ["reasoning.encrypted_content"] asks for the reasoning
//     in a form the API accepts back without stored state.
//
// How a model.Request maps onto a Chat Completions request: system, user and
// assistant messages keep their roles and places (an assistant message's
// tool calls become tool_calls with their ids and arguments), tool results
// are "tool" messages with tool_call_id (IsError marked as above), tools are
// function tools. max_output_tokens is sent as max_completion_tokens to
// OpenAI and as max_tokens to compatible servers, which know that one.
// stream_options.include_usage asks for the usage chunk.
//
// How a stream maps back. Every call streams. Text deltas go to
// Request.OnDelta as Delta.Text, reasoning summary deltas (and the reasoning
// text some compatible servers stream as reasoning_content or reasoning) as
// Delta.Reasoning, in order, from the calling goroutine. The Response is
// built from the items of response.output_item.done (the API's final form
// of each item), completed by the terminal event's output: message text
// joins into Text, function_call items become ToolCalls (arguments that are
// not valid JSON are kept as a JSON string, so the tool's schema check tells
// the model), and reasoning items become Reasoning (Provider "openai"; Text
// is the summaries; ID and Encrypted are those of the last reasoning item
// with encrypted content, as model.Reasoning holds one). Chat tool call
// fragments are joined by their index. Model is the model that answered;
// StopReason is the response's status ("completed", or the incomplete reason
// such as "max_output_tokens") or Chat's finish_reason. Usage follows
// lt.Usage, which is the APIs' own convention: cached tokens
// (input_tokens_details / prompt_tokens_details .cached_tokens) are part of
// the input, reasoning tokens (output_tokens_details /
// completion_tokens_details .reasoning_tokens) part of the output; CostUSD is
// model.CostOf(spec, usage).
//
// What the engine must do: keep each assistant Response's Reasoning on the
// model.Message it journals, and pass it back unchanged in later requests.
// The reasoning item is sent back (without its item id, which would make the
// API look for items it never stored) before the message's text and tool
// calls, when its Provider is "openai" and it has encrypted content.
//
// Invariants:
//
//   - Complete responses only. A Response is returned only after the stream's
//     terminal event: response.completed or response.incomplete (Responses),
//     or a finish_reason and, from OpenAI itself, the usage chunk (Chat; a
//     compatible server may not send usage). A stream that ends early, breaks
//     off, carries an error (an "error" event, response.failed, an {"error"}
//     chunk) or a malformed chunk returns a *model.Error, retryable unless
//     the API said otherwise, and no response: the engine retries the call as
//     a whole and never journals half an answer.
//   - No SDK retries, nothing from the environment: the SDK's services are
//     built directly, not through openai.NewClient, whose defaults read
//     OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_ORG_ID and more; and with
//     retries off, because the engine retries and journals every attempt (a
//     hidden retry would be an unrecorded, possibly billed, call). The key
//     comes only from Request.APIKey (sent as "Authorization: Bearer"; none
//     is sent when it is empty) and the address only from the spec.
//   - Errors are classified for the retry policy: model.KindForStatus on the
//     HTTP status (529 overloaded), RetryAfter from retry-after-ms or
//     retry-after (seconds or an HTTP date), context_length_exceeded (or a 400
//     that says the context is too long, or a 413) → model.KindContextTooLong,
//     insufficient_quota → model.KindAuth (waiting does not cure it),
//     deadlines and network timeouts → model.KindTimeout, refused or reset
//     connections and malformed bodies → model.KindServer. A cancelled ctx is
//     returned wrapped instead, so errors.Is(err, context.Canceled) holds.
//   - Keys never appear in an error: messages are built from the API's error
//     code and message only (never headers or the request), then scrubbed of
//     the key and of anything that looks like one (the API quotes a masked
//     wrong key), and cut to one short line.
//
// It imports the SDK, internal/model and longhaultype. The engine uses it
// through model.Provider and model.SpecValidator, wired by provider name in
// internal/node. Who may import it: internal/node and tests.
package openai
